"""kazoo's reconnect chatter, folded: a client whose ZooKeeper goes away for seconds logs one line when it
goes and one when it is back (how long, how many tries folded), not a line per try."""

from __future__ import annotations

import logging
import time

import pytest

from airflow_epochs.connection.zookeeper import ZooKeeperSettings
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper

pytestmark = pytest.mark.integration


def test_an_outage_is_two_lines_in_the_clients_log(tmp_path, caplog):
    server = EmbeddedZooKeeper(directory=tmp_path / "zk")
    server.start()
    client = None
    try:
        settings = ZooKeeperSettings.from_fields(host=f"127.0.0.1:{server.port}", extra={"session_timeout": 30})
        client = settings.start_client(timeout=30)
        with caplog.at_level(logging.DEBUG, logger="airflow_epochs.kazoo"):
            server.kill(0)
            time.sleep(6)  # kazoo tries again and again meanwhile
            server.restart(0)
            deadline = time.monotonic() + 60
            while not client.connected or not any("after" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
                time.sleep(0.2)
        lines = [r for r in caplog.records if r.name == "airflow_epochs.kazoo" and r.levelno >= logging.INFO]
        away = [r.getMessage() for r in lines if "is away" in r.getMessage()]
        back = [r.getMessage() for r in lines if "reconnect lines folded" in r.getMessage()]
        assert len(away) == 1 and len(back) == 1, [r.getMessage() for r in lines]
        folded = int(back[0].split("(")[-1].split()[0])
        assert folded >= 3, back  # the tries that were not logged
        during = lines[next(i for i, r in enumerate(lines) if "is away" in r.getMessage()):]  # the outage on
        assert not [r for r in during if r.getMessage().startswith(("Connection dropped", "Connecting to"))
                    and "is away" not in r.getMessage()], [r.getMessage() for r in during]
        assert client.exists("/") is not None  # and the client works again
    finally:
        if client is not None:
            client.stop()
            client.close()
        server.stop()
