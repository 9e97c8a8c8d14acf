"""ZooKeeperHook and connection settings: mapping, secrets kept out of logs, real connections."""

from __future__ import annotations

import json
import logging

import pytest
from kazoo.exceptions import NoAuthError

from airflow_epochs.servers.embedded_zookeeper import free_port


def _set_conn(monkeypatch, conn_id, **fields):
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "zookeeper", **fields}))


@pytest.mark.integration
def test_test_connection_against_real_server_and_closed_port(monkeypatch, zk_server, airflow_home):
    from airflow_epochs.hooks.zookeeper import ZooKeeperHook

    monkeypatch.setenv("AIRFLOW_CONN_ZK_OK", zk_server.connection_json())
    ok, message = ZooKeeperHook("zk_ok").test_connection()
    assert ok, message
    assert "3.9" in message

    _set_conn(monkeypatch, "zk_closed", host=f"127.0.0.1:{free_port()}", extra={"connection_timeout": 2})
    ok, message = ZooKeeperHook("zk_closed").test_connection()
    assert not ok
    assert "Could not connect to ZooKeeper at 127.0.0.1:" in message


@pytest.mark.integration
def test_hook_is_lazy_and_closes_its_client(monkeypatch, zk_server, zk_chroot, airflow_home):
    from airflow_epochs.hooks.zookeeper import ZooKeeperHook

    ZooKeeperHook("no_such_connection")  # DAG parse time: must not look the connection up
    monkeypatch.setenv("AIRFLOW_CONN_ZK_LAZY", zk_server.connection_json(zk_chroot))
    with ZooKeeperHook("zk_lazy") as hook:
        client = hook.get_conn()
        assert hook.get_conn() is client
        client.create("/made-by-hook", b"x")
    assert not client.connected
    raw = zk_server.client()
    try:
        assert raw.exists(f"{zk_chroot}/made-by-hook")  # the chroot was applied
    finally:
        raw.stop()


@pytest.mark.integration
def test_the_hooks_ledger_binds_every_recipe_to_its_pipeline(monkeypatch, zk_server, zk_chroot, airflow_home):
    import datetime

    from airflow_epochs.coordination import InvalidInput, PipelineConfig, StragglerPolicy
    from airflow_epochs.hooks.zookeeper import ZooKeeperHook

    monkeypatch.setenv("AIRFLOW_CONN_ZK_HANDLE", zk_server.connection_json(zk_chroot))
    with ZooKeeperHook("zk_handle") as hook:
        ledger = hook.ledger("handle", owner="deploy-a")
        ledger.create_pipeline(PipelineConfig({"out": ("job",)}))
        attempt = ledger.open_epoch(1)
        barrier = ledger.barrier(1, "in", generation=attempt.generation)
        barrier.declare(StragglerPolicy.fail(600), ["a", "b"])
        barrier.arrive("a")
        assert (barrier.status().arrived, barrier.status().late) == (("a",), ("b",))
        ledger.lease(duration=datetime.timedelta(seconds=30)).acquire()
        assert ledger.lease(owner="status-reader").holder().owner == "deploy-a"
        with ledger.lock("write.out", identifier="deploy-a"):
            assert hook.get_conn().get_children(ledger.paths.lock("write.out"))  # held under the pipeline
        report = ledger.consumer("report")
        assert report.register().acked == 0
        assert [(c.consumer, c.acked) for c in ledger.backpressure().consumers()] == [("report", 0)]
        ledger.vote(attempt, "out", "job", {"rows": 1}, upstream={"raw": 3})
        assert report.acknowledge(1).acked == 1
        assert ledger.lineage(1, "out").upstream == {"raw": 3}
        assert report.unregister() is True and ledger.backpressure().consumers() == []
        with pytest.raises(InvalidInput, match="bad/name"):
            ledger.consumer("bad/name")  # refused before anything is read or written


@pytest.mark.integration
def test_a_connected_ledger_closes_its_own_client_and_refuses_bad_names_before_connecting(zk_server, zk_chroot):
    from airflow_epochs.coordination import InvalidInput, PipelineConfig
    from airflow_epochs.coordination.ledger import connected_ledger

    started = []

    def start_client():
        client = zk_server.client(zk_chroot, start=False)
        client.start()
        started.append(client)
        return client

    with connected_ledger(start_client, "one-shot", owner="cli") as ledger:
        ledger.create_pipeline(PipelineConfig({"out": ("job",)}))
        assert ledger.frontier() == 0 and ledger.owner == "cli"
    assert len(started) == 1 and not started[0].connected
    for bad in ({"pipeline": "bad/name"}, {"pipeline": "ok", "root": "relative"}):
        with pytest.raises(InvalidInput), connected_ledger(start_client, **bad):
            pass
    assert len(started) == 1  # refused before any connection was made


@pytest.mark.integration
def test_digest_acl_protects_created_nodes_and_password_is_not_logged(
    monkeypatch, zk_server, zk_chroot, airflow_home, caplog
):
    from airflow_epochs.hooks.zookeeper import ZooKeeperHook

    monkeypatch.setenv("AIRFLOW_CONN_ZK_ACL", zk_server.connection_json(
        zk_chroot, login="etl", password="pw-never-logged", use_acl=True))
    caplog.set_level(logging.DEBUG)
    with ZooKeeperHook("zk_acl") as hook:
        hook.get_conn().create("/private", b"secret-data")
        assert hook.get_conn().get("/private")[0] == b"secret-data"
    assert "pw-never-logged" not in caplog.text
    # The server admits no session without an identity: another identity stands for "anonymous".
    stranger = zk_server.client(zk_chroot, login="stranger", password="not-etl")
    try:
        with pytest.raises(NoAuthError):
            stranger.get("/private")
        wrong = zk_server.client(zk_chroot, login="etl", password="wrong")
        with pytest.raises(NoAuthError):
            wrong.get("/private")
        wrong.stop()
    finally:
        stranger.stop()
