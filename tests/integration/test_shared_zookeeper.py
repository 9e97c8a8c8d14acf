"""Issue 35: the tests' shared ZooKeeper (the ``zk_server`` fixture, which every coordination test and the
scheduler-driven deployments use) is secured as the product's: another local user (a throw-away second
account, created and removed by the test) gets no session on it nor on the proxy that drops answers,
a client of ours without credentials gets nothing either, and the old plaintext idiom fails saying what
to use instead."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from intruder import Intruder, second_user
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from zk_attacks import attack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def intruder() -> Iterator[Intruder]:
    with second_user() as user:
        yield user


def test_another_user_gets_no_session_on_the_shared_server_nor_through_the_proxy(intruder, zk_server, proxy, zk):
    """The second user's ConnectRequests (after a TLS handshake without our certificate) get no ZooKeeper
    answer, on the server's one port and on the proxy's; the server's only port is the TLS one. The control:
    our client, through the same proxy, works."""
    assert attack(intruder, zk_server.port, 20, watches=10, seconds=30) == (20, 0)
    assert attack(intruder, proxy.port, 20, watches=10, seconds=30) == (20, 0)
    assert "Mode: standalone" in zk_server.four_letter_word("srvr")
    through = proxy.client("", timeout=10)
    try:
        assert through.exists("/") is not None
    finally:
        through.stop()
        through.close()
    zk.create("/still-ours", b"1")


def test_our_certificate_without_credentials_gets_nothing(zk_server):
    """TLS with our certificate but no digest identity: the session is closed at its first request."""
    settings = zk_server.settings()
    bare = KazooClient(hosts=zk_server.address, use_ssl=True, ca=settings.ca, certfile=settings.certfile,
                       keyfile=settings.keyfile, check_hostname=True, timeout=10)
    try:
        bare.start(timeout=15)
        with pytest.raises(KazooException):
            bare.get_children("/")
    except KazooTimeoutError:
        pass  # refused while connecting: nothing read either
    finally:
        bare.stop()
        bare.close()


def test_the_old_plaintext_idiom_fails_naming_the_new_one(zk_server, proxy):
    with pytest.raises(AttributeError, match=r"zk_server\.client\(chroot"):
        zk_server.hosts  # noqa: B018 - the attribute access is the test
    with pytest.raises(AttributeError, match=r"proxy\.client\(chroot"):
        proxy.hosts  # noqa: B018
    plain = KazooClient(hosts=zk_server.address, timeout=5)  # no TLS: the server's one port wants it
    with pytest.raises(KazooTimeoutError):
        plain.start(timeout=5)
