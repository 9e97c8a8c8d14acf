"""ZooKeeper connection settings without a server: hosts, ports and chroot mapping, digest, ACL and
TLS options, bad connections named by value, and secrets kept out of every description."""

from __future__ import annotations

import pytest

from airflow_epochs.connection.zookeeper import InvalidConnection, ZooKeeperSettings


def settings(**fields):
    return ZooKeeperSettings.from_fields(**{"host": "zk1:2181", **fields})


def test_hosts_ports_and_chroot_mapping():
    s = settings(host="zk1,zk2:2182, zk3", port=2200, schema="analytics")
    assert s.hosts == ("zk1:2200", "zk2:2182", "zk3:2200")
    assert s.kazoo_kwargs()["hosts"] == "zk1:2200,zk2:2182,zk3:2200/analytics"
    assert settings(host="a:1,b:2/app/x").chroot == "/app/x"
    assert settings().kazoo_kwargs() == {"hosts": "zk1:2181", "timeout": 10.0, "read_only": False, "connection_retry": {
        "max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}}  # tries again at most a second apart


def test_digest_acl_and_tls_options():
    s = settings(login="etl", password="s3cret", extra={"use_acl": "true", "use_tls": True, "ca": "/ca.pem",
                                                       "session_timeout": "30"})
    kwargs = s.kazoo_kwargs()
    assert kwargs["auth_data"] == [("digest", "etl:s3cret")]
    assert kwargs["default_acl"][0].id.scheme == "digest"
    assert kwargs["use_ssl"] and kwargs["check_hostname"] is True and kwargs["verify_certs"] is True
    assert kwargs["timeout"] == 30.0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"host": ""}, "at least one host"),
        ({"host": "zk1:99999"}, "invalid host entry"),
        ({"host": "zk1:2181,,zk2"}, "empty entry"),
        ({"schema": "../etc"}, "invalid chroot"),
        ({"host": "a:1/x", "schema": "y"}, "chroot given twice"),
        ({"login": "etl"}, "both a login and a password"),
        ({"extra": {"use_acl": True}}, "use_acl needs digest credentials"),
        ({"extra": {"ca": "/ca.pem"}}, "use_tls is false"),
        ({"extra": {"session_timeout": "soon"}}, "number of seconds"),
        ({"extra": {"read_only": "maybe"}}, "true or false"),
        ({"extra": {"spark-binary": "/bin/sh"}}, "unknown ZooKeeper connection extra 'spark-binary'"),
    ],
)
def test_bad_connections_name_the_bad_value(fields, message):
    with pytest.raises(InvalidConnection, match=message):
        settings(**fields)


def test_secrets_never_appear_in_descriptions():
    s = settings(login="etl", password="hunter2-secret", extra={"use_tls": True, "keyfile_password": "kp-secret"})
    for text in (s.describe(), repr(s), str(s)):
        assert "hunter2-secret" not in text and "kp-secret" not in text
    assert "etl" in s.describe()


