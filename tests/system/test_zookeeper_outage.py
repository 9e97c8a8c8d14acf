"""Riding through a ZooKeeper outage: the server is killed (-9) in the middle of a multi-epoch run of
real DAG runs (``dag.test``) and restarted about 20 s later on the same port and data; the runs finish
by themselves (the tasks' in-try retries wait for it), and every epoch is sealed exactly once, in order."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from kazoo.client import KazooClient
from zk_helpers import assert_epochs_in_order

from airflow_epochs.coordination import EpochLedger, PipelineNotFound
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper, free_port

# A run that does not ride through hangs (the next epoch waits for ever for its predecessor): the
# thread method ends the whole process then, and the server, started to die with it, goes too.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(420, method="thread")]

OUTAGE_SECONDS = 20.0
EPOCHS = 4


def _day(n: int) -> datetime:
    return datetime(2013, 1, 1, tzinfo=timezone.utc) + timedelta(days=n - 1)


def test_dag_runs_ride_through_a_zookeeper_outage_and_seal_every_epoch_once(dagbag, monkeypatch, tmp_path):
    server = EmbeddedZooKeeper(directory=tmp_path / "zookeeper", port=free_port(), die_with_parent=True)
    server.start()
    timeline: dict[str, float] = {}
    problems: list[BaseException] = []
    finished = threading.Event()

    def kill_mid_epoch_2() -> None:
        """Kill the server once epoch 2 is half done (a partition sealed, the epoch still open)."""
        try:
            client = KazooClient(hosts=server.hosts)
            client.start(timeout=15)
            ledger = EpochLedger(client, "flights_daily")
            deadline = time.monotonic() + 300
            while True:
                try:
                    if ledger.seal(2, "flights") or ledger.seal(2, "weather"):
                        break
                except PipelineNotFound:
                    pass
                assert time.monotonic() < deadline, "epoch 2 never got a sealed partition"
                time.sleep(0.05)
            client.stop()
            client.close()
            server.kill(0)  # SIGKILL: a crash, not a clean stop
            timeline["killed"] = time.monotonic()
            time.sleep(OUTAGE_SECONDS)
            server.restart(0)
            timeline["back"] = time.monotonic()
        except BaseException as exc:  # noqa: BLE001 - reported by the test body
            problems.append(exc)
        # The restarted server dies with the thread that started it: this one lives until the end.
        finished.wait(600)

    try:
        monkeypatch.setenv("AIRFLOW_CONN_ZOOKEEPER_DEFAULT",
                           json.dumps({"conn_type": "zookeeper", "host": server.hosts}))
        dag = dagbag.get_dag("example_epoch_pipeline")
        saboteur = threading.Thread(target=kill_mid_epoch_2, daemon=True)
        saboteur.start()
        runs: dict[int, tuple[float, float, str]] = {}
        for n in range(1, EPOCHS + 1):
            started = time.monotonic()
            run = dag.test(logical_date=_day(n), run_conf={"max_delay": 0.2})
            runs[n] = (started, time.monotonic(), str(run.state))
        assert not problems, problems
        for n, (_, _, state) in runs.items():
            assert "success" in state, (n, state)
        # The outage really fell inside epoch 2's run, and that run waited for the server to come back.
        start_2, end_2, _ = runs[2]
        assert start_2 < timeline["killed"] < end_2, (runs, timeline)
        assert end_2 > timeline["back"], (runs, timeline)

        client = KazooClient(hosts=server.hosts)
        client.start(timeout=15)
        try:
            ledger = EpochLedger(client, "flights_daily")
            assert ledger.frontier() == EPOCHS
            assert_epochs_in_order(ledger, EPOCHS)
            sealed = [(e.detail["epoch"], e.detail["partition"]) for e in ledger.history()
                      if e.event == "partition_sealed"]
            assert sorted(sealed) == sorted((n, p) for n in range(1, EPOCHS + 1)
                                            for p in ("flights", "weather", "daily"))
        finally:
            client.stop()
            client.close()
    finally:
        server.stop()
        finished.set()
