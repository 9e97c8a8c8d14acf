"""The Airflow surface with real DAG runs against a real ZooKeeper: the full epoch stage shape,
ordering across overlapping runs, two deployments racing, sensors and asset events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from airflow_db import private_airflow_db
from zk_helpers import assert_epochs_in_order

from airflow_epochs.coordination import EpochLedger, PipelineConfig

pytestmark = [pytest.mark.integration]

PIPELINE = "flights_daily"


def day(n: int) -> datetime:
    return datetime(2013, 1, n, tzinfo=timezone.utc)


def test_full_stage_shape_seals_partitions_and_emits_partitioned_asset_events(dagbag, zk_connection, zk):
    started = datetime.now(timezone.utc)  # the metadata database is shared with earlier tests' runs
    dag = dagbag.get_dag("example_epoch_pipeline")
    for n in (1, 2):
        run = dag.test(logical_date=day(n), run_conf={"max_delay": 0})
        assert "success" in str(run.state), run.state
    ledger = EpochLedger(zk, PIPELINE)
    assert ledger.frontier() == 2
    for epoch in (1, 2):
        info = ledger.epoch_info(epoch)
        assert info.state == "sealed" and set(info.sealed_partitions) == {"flights", "weather", "daily"}
    barrier_events = [e for e in ledger.history() if e.event == "barrier_released"]
    assert [(e.detail["epoch"], e.detail["decision"]) for e in barrier_events] == [(1, "all"), (2, "all")]
    # the join voted only after both producers passed the barrier
    released_at = next(e.at for e in barrier_events if e.detail["epoch"] == 1)
    assert released_at < ledger.vote_of(1, "daily", "join").voted_at

    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(AssetEvent).filter(AssetEvent.timestamp >= started).all()
        keys = sorted((row.partition_key, row.extra.get("epoch")) for row in rows
                      if row.extra.get("pipeline") == PIPELINE)
    assert keys == [("1", 1), ("2", 2)]


def test_open_waits_for_previous_epoch_then_opens(dagbag, zk_connection, zk):
    """Epoch 2's run starts first; its open task defers until epoch 1 is sealed by another run."""
    dag = dagbag.get_dag("example_epoch_pipeline")
    ledger = EpochLedger(zk, PIPELINE, owner="elsewhere")
    ledger.create_pipeline(PipelineConfig.from_json({
        "partitions": {"flights": ["ingest_flights"], "weather": ["ingest_weather"], "daily": ["join"]},
        "barriers": {"ingested": ["ingest_flights", "ingest_weather"]}}))
    sealed_first: list[float] = []

    def seal_epoch_1_later():
        time.sleep(3)
        attempt = ledger.open_epoch(1)
        for partition, producer in (("flights", "ingest_flights"), ("weather", "ingest_weather"), ("daily", "join")):
            ledger.vote(attempt, partition, producer, {"by": "elsewhere"})
        sealed_first.append(time.monotonic())

    helper = threading.Thread(target=seal_epoch_1_later)
    helper.start()
    run = dag.test(logical_date=day(2), run_conf={"max_delay": 0})
    helper.join()
    assert "success" in str(run.state)
    history = [(e.event, e.detail.get("epoch")) for e in EpochLedger(zk, PIPELINE).history()]
    assert history.index(("epoch_sealed", 1)) < history.index(("epoch_opened", 2))
    assert EpochLedger(zk, PIPELINE).frontier() == 2


def test_open_without_deferral_waits_on_a_watch_with_no_deadline(dagbag, zk_connection, zk):
    """deferrable=False, backpressure_wait=None: the open task of epoch 2 waits in the worker, with no
    deadline, until another deployment seals epoch 1, and opens epoch 2 as soon as it is sealed."""
    other = EpochLedger(zk, "in-worker", owner="elsewhere")
    other.create_pipeline(PipelineConfig({"out": ("job",)}))
    first = other.open_epoch(1)
    sealed_at: list[float] = []

    def seal_later() -> None:
        time.sleep(4)
        other.vote(first, "out", "job")
        sealed_at.append(time.time())

    helper = threading.Thread(target=seal_later)
    helper.start()
    run = dagbag.get_dag("test_open_in_worker").test(run_conf={"pipeline": "in-worker", "epoch": 2})
    helper.join()
    assert "success" in str(run.state)
    info = other.epoch_info(2)
    assert (info.state, info.owner) == ("open", "worker-deployment")
    assert 0 <= info.opened_at - sealed_at[0] < 2.0  # woken by the seal, not by a poll or a deadline


def _deployment_home(airflow_home: Path, name: str, tmp_path: Path) -> dict[str, str]:
    return {**private_airflow_db(airflow_home, tmp_path / name), "AIRFLOW_EPOCHS_DEPLOYMENT": name}


def _dags_test(env: dict[str, str], date: str, log: Path) -> subprocess.Popen:
    airflow = str(Path(sys.executable).parent / "airflow")
    handle = open(log, "w")  # noqa: SIM115 - closed by the caller through the process
    return subprocess.Popen([airflow, "dags", "test", "example_epoch_pipeline", date, "-c",
                             json.dumps({"max_delay": 0.5})], env={**os.environ, **env},
                            stdout=handle, stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_overlapping_runs_seal_epochs_in_order(airflow_home, zk_connection, zk, tmp_path):
    """Six daily intervals run at once (started newest first, three per deployment home): every epoch
    is opened after the previous one is sealed, and sealed exactly once."""
    procs = []
    for n in (6, 5, 4, 3, 2, 1):
        env = _deployment_home(airflow_home, f"run{n}", tmp_path)
        env["AIRFLOW_EPOCHS_DEPLOYMENT"] = "deploy-a"  # one deployment, overlapping runs
        procs.append(_dags_test(env, f"2013-01-0{n}", tmp_path / f"run{n}.log"))
        time.sleep(0.3)
    for proc in procs:
        assert proc.wait(timeout=600) == 0, (tmp_path / "run1.log").read_text()[-3000:]
    ledger = EpochLedger(zk, PIPELINE)
    assert ledger.frontier() == 6
    assert_epochs_in_order(ledger, 6)


@pytest.mark.slow
def test_two_deployments_race_one_seals_the_other_skips(airflow_home, zk_connection, zk, tmp_path):
    procs = []
    for name in ("deploy-a", "deploy-b"):
        env = _deployment_home(airflow_home, name, tmp_path)
        procs.append((name, _dags_test(env, "2013-01-01", tmp_path / f"{name}.log")))
    for _, proc in procs:
        assert proc.wait(timeout=600) == 0
    ledger = EpochLedger(zk, PIPELINE)
    info = ledger.epoch_info(1)
    assert info.state == "sealed"
    seals = [e for e in ledger.history() if e.event == "epoch_sealed"]
    assert len(seals) == 1 and seals[0].detail["owner"] == info.owner
    loser = "deploy-b" if info.owner == "deploy-a" else "deploy-a"
    log = (tmp_path / f"{loser}.log").read_text()
    assert f"epoch 1 is already sealed by {info.owner}" in log
    assert "skipped" in log.lower()


def test_standby_takes_over_when_the_leader_dies(dagbag, zk_connection, zk, monkeypatch):
    """A leader (another deployment) sealed epoch 1, opened epoch 2 and died holding a short lease.
    This deployment's run waits for the lease to run out, takes over epoch 2 under a new attempt and
    finishes it; the dead leader's attempt can no longer vote."""
    import datetime as dt

    from airflow_epochs.coordination import AttemptSuperseded

    monkeypatch.setenv("AIRFLOW_EPOCHS_DEPLOYMENT", "deploy-a")
    ghost = EpochLedger(zk, PIPELINE, owner="deploy-ghost")
    ghost.create_pipeline(PipelineConfig.from_json({
        "partitions": {"flights": ["ingest_flights"], "weather": ["ingest_weather"], "daily": ["join"]},
        "barriers": {"ingested": ["ingest_flights", "ingest_weather"]}}))
    first = ghost.open_epoch(1)
    for partition, producer in (("flights", "ingest_flights"), ("weather", "ingest_weather"), ("daily", "join")):
        ghost.vote(first, partition, producer, {"by": "ghost"}, snapshot=f"totals@1/{partition}")
    EpochLedger(zk, PIPELINE, owner="deploy-ghost").lease(duration=dt.timedelta(seconds=3)).acquire()
    zombie = ghost.open_epoch(2)
    ghost.vote(zombie, "flights", "ingest_flights", {"by": "ghost"})

    run = dagbag.get_dag("example_epoch_pipeline").test(logical_date=day(2), run_conf={"max_delay": 0})
    assert "success" in str(run.state)
    info = EpochLedger(zk, PIPELINE).epoch_info(2)
    assert (info.state, info.owner, info.attempt) == ("sealed", "deploy-a", zombie.token + 1)
    ledger = EpochLedger(zk, PIPELINE)
    # what the dead leader sealed stays sealed (immutable); the rest is sealed by the successor
    assert ledger.seal(2, "flights").attempt == zombie.token
    assert ledger.seal(2, "weather").attempt == zombie.token + 1
    assert ledger.seal(2, "weather").manifests["ingest_weather"]["rows"] == "20"
    with pytest.raises((AttemptSuperseded, Exception)) as refused:
        ghost.vote(zombie, "weather", "ingest_weather", {"by": "ghost"})
    assert type(refused.value).__name__ in ("AttemptSuperseded", "EpochAlreadySealed")
    opened = run.get_task_instance("epoch.open")
    assert opened is not None and "success" in str(opened.state)
