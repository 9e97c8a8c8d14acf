"""Epochs under Airflow's own scheduling (not dag.test): PostgreSQL, API server, scheduler, triggerer
and DAG processor started once for this module.

- Gating: each sealed partition gives exactly one downstream run (a partitioned-asset run whose
  partition key is the epoch), and the deferred sensor in it passes only because the seal exists.
- Catch-up: six daily intervals with ``max_active_runs=3`` and random task delays; the runs overlap,
  yet every epoch opens after the previous one is sealed (waits deferred in the real triggerer).
- HA triggerers: seals written outside Airflow become asset events through an AssetWatcher; the
  triggerer running the watcher is killed -9 once its events are delivered, the other one takes the
  trigger over and resumes from the delivery cursor: every seal gives exactly one asset event.
- A triggerer killed between a seal and its stored asset event (its supervisor frozen, so the event
  never reaches the database): a new triggerer delivers the seal again, once.
- A trigger runner that dies while its triggerer process lives: Airflow 3.3 ends that triggerer (its
  job stops heartbeating), and the other triggerer takes the watcher over and delivers the next seal once.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time

import pytest
from airflow_stack import REPO, AirflowStack, postgres_bin
from kazoo.client import KazooClient
from zk_helpers import assert_epochs_in_order, fresh_chroot_client

from airflow_epochs.coordination import EpochLedger, PipelinePaths
from airflow_epochs.coordination.recipes.delivery.paths import DeliveryPaths
from airflow_epochs.coordination.recipes.delivery.records import DeliveryCursor

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def stack_zk(zk_server):
    """A chroot for this module's deployment (its connection is fixed when the stack starts)."""
    yield from fresh_chroot_client(zk_server, "scheduled")


@pytest.fixture(scope="module")
def stack(tmp_path_factory, zk_server, stack_zk, airflow_pg_template):
    if postgres_bin() is None:
        pytest.fail("PostgreSQL server binaries not installed: .ci/run installs Debian's postgresql")
    deployment = AirflowStack(tmp_path_factory.mktemp("stack"), template=airflow_pg_template, env={
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": zk_server.connection_json(stack_zk[0]),
        # a dead triggerer's triggers move to a live one after this many seconds without heartbeat
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2"})
    try:
        deployment.start([REPO / "tests" / "dags" / name
                          for name in ("scheduled_gating.py", "scheduled_catchup.py", "watched_seals.py")])
        yield deployment
    finally:
        deployment.stop()



def test_one_downstream_run_per_sealed_partition_under_the_scheduler(stack, stack_zk):
    zk = stack_zk[1]
    stack.wait_for_dags(["gating_upstream", "gating_downstream"])
    for dag_id in ("gating_downstream", "gating_upstream"):
        stack.unpause(dag_id)
    epochs = (1, 2, 3)
    for epoch in epochs:
        stack.trigger("gating_upstream", {"epoch": epoch})  # through the API server: no Airflow start per run
    stack.wait_for_successes("gating_downstream", len(epochs), 480)
    time.sleep(10)  # no late duplicate arrives
    runs = stack.runs("gating_downstream")
    ledger = EpochLedger(zk, "gating")
    assert ledger.frontier() == len(epochs)
    assert len(runs) == len(epochs), runs
    rows = stack.query("SELECT partition_key, extract(epoch FROM start_date) FROM dag_run WHERE dag_id = %s",
                       "gating_downstream")
    assert sorted(str(key) for key, _ in rows) == [str(e) for e in epochs], rows
    for key, started in rows:  # a downstream run never starts before its partition's seal
        seal = ledger.seal(int(str(key)), "daily")
        assert seal is not None
        assert float(started) >= seal.sealed_at - 0.5, (key, started, seal.sealed_at)


def test_catch_up_runs_overlap_but_epochs_open_and_seal_in_order(stack, stack_zk):
    zk = stack_zk[1]
    stack.wait_for_dags(["catchup_epochs"])
    stack.unpause("catchup_epochs")
    runs = stack.wait_for_successes("catchup_epochs", 6, 600)
    time.sleep(5)  # the scheduler creates no seventh run past end_date
    assert len(stack.runs("catchup_epochs")) == 6, runs

    ledger = EpochLedger(zk, "catchup")
    assert ledger.frontier() == 6
    assert_epochs_in_order(ledger, 6)

    # The calendar gave each interval its own epoch: the run of day n sealed epoch n.
    rows = stack.query(
        "SELECT extract(day FROM dr.data_interval_start), x.value FROM dag_run dr JOIN xcom x "
        "ON x.dag_id = dr.dag_id AND x.run_id = dr.run_id WHERE dr.dag_id = %s AND x.task_id = %s "
        "AND x.key = %s", "catchup_epochs", "epoch.open", "return_value")
    epochs = {int(day): json.loads(value if isinstance(value, str) else json.dumps(value))["epoch"]
              for day, value in rows}
    assert epochs == {n: n for n in range(1, 7)}, rows

    # Up to three runs really were in flight at once: the order came from the epochs, not from Airflow.
    spans = stack.query("SELECT extract(epoch FROM start_date), extract(epoch FROM end_date) FROM dag_run "
                        "WHERE dag_id = %s ORDER BY start_date", "catchup_epochs")
    overlapping = max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)
    assert 2 <= overlapping <= 3, spans
    # ... and the runs that came early waited deferred in the triggerer, not in a worker slot.
    open_logs = sorted(log for log in (stack.home / "logs" / "dag_id=catchup_epochs").glob(
        "run_id=*/task_id=epoch.open/attempt=*.log") if ".trigger." not in log.name)
    deferred = [log for log in open_logs if "waits for epoch" in log.read_text()
                and "Pausing task as DEFERRED" in log.read_text()]
    # One open task per run; a busy machine may add tries (Airflow's defer race marks a resumed task
    # failed, and its retry, idempotent, resumes the same attempt): count runs, not log files.
    assert len({log.parent.parent.name for log in open_logs}) == 6 and deferred, open_logs


def _watched_epochs(stack: AirflowStack) -> list[int]:
    rows = stack.query("SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.uri = %s",
                       "epochs://watched/daily")
    extras = [json.loads(extra) if isinstance(extra, str) else extra for (extra,) in rows]
    return sorted(int(extra["payload"]["epoch"]) for extra in extras)


def _delivered_through(zk: KazooClient) -> int:
    """Where the watcher's delivery cursor stands: seals before it are stored as asset events."""
    path = DeliveryPaths(PipelinePaths("watched")).cursor("stack", "daily")
    return DeliveryCursor.from_bytes(zk.get(path)[0], path=path).following - 1 if zk.exists(path) else 0


def _seal(ledger: EpochLedger, epoch: int) -> None:
    ledger.vote(ledger.open_epoch(epoch), "daily", "job", {"rows": epoch})


def _wait_until(predicate, timeout: float, what) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what()
        time.sleep(1)


def test_watched_seals_give_one_asset_event_each_across_a_triggerer_crash(stack, stack_zk):
    from airflow_epochs.coordination import PipelineConfig

    ledger = EpochLedger(stack_zk[1], "watched", owner="outside")
    ledger.create_pipeline(PipelineConfig({"daily": ("job",)}))
    stack.wait_for_dags(["watched_consumer"])
    stack.unpause("watched_consumer")
    stack.spawn("triggerer-2", ["triggerer"])
    for epoch in (1, 2, 3):
        _seal(ledger, epoch)
    _wait_until(lambda: len(_watched_epochs(stack)) >= 3, 180,
                lambda: (_watched_epochs(stack), stack.log_tail("triggerer"), stack.log_tail("triggerer-2")))
    # Airflow confirms stored events to the trigger a sync round later; then the cursor moves.
    _wait_until(lambda: _delivered_through(stack_zk[1]) == 3, 60, lambda: _delivered_through(stack_zk[1]))
    _wait_until(lambda: stack.watcher_triggerer() is not None, 60, lambda: "no triggerer owns the watcher")
    crashed = stack.watcher_triggerer()
    # both alive before one is killed (a triggerer that already died leaves nobody to take over)
    stack.running("triggerer", "triggerer-2")
    stack.kill(crashed)

    # The survivor restarts the trigger from the cursor: epochs 1-3 are not delivered again.
    _seal(ledger, 4)
    _wait_until(lambda: len(_watched_epochs(stack)) >= 4, 180,
                lambda: (_watched_epochs(stack), stack.log_tail("triggerer"), stack.log_tail("triggerer-2")))
    time.sleep(8)  # room for a late duplicate
    assert _watched_epochs(stack) == [1, 2, 3, 4]
    survivor = "triggerer-2" if crashed == "triggerer" else "triggerer"
    assert stack.watcher_triggerer() == survivor
    # the survivor ran the trigger from the cursor and fired for epoch 4 only
    fired = re.findall(r"Trigger fired event.*?'epoch': (\d+)", stack.log_tail(survivor, 1_000_000))
    assert fired == ["4"], fired


def test_a_triggerer_killed_between_a_seal_and_its_asset_event_delivers_it_once(stack, stack_zk):
    """The watcher's triggerer sees the seal but dies before Airflow stores the event: its supervisor
    is frozen (the runner still takes the seal and hands the event over), then the whole triggerer is
    killed -9. Delivery marked before storing would lose the seal; here a new triggerer delivers it
    again, once, and the downstream runs once for it."""
    ledger = EpochLedger(stack_zk[1], "watched", owner="outside")
    _wait_until(lambda: stack.watcher_triggerer() is not None, 60, lambda: "no triggerer owns the watcher")
    _wait_until(lambda: _delivered_through(stack_zk[1]) == 4, 60, lambda: _delivered_through(stack_zk[1]))
    owner = stack.watcher_triggerer()
    runs_before = len(stack.runs("watched_consumer"))
    os.kill(stack.procs[owner].pid, signal.SIGSTOP)  # the supervisor: it stores the events
    try:
        _seal(ledger, 5)
        time.sleep(3)  # the runner sees the seal and hands its event to the frozen supervisor
        assert _watched_epochs(stack) == [1, 2, 3, 4]
    finally:
        stack.kill(owner)
    stack.spawn(owner, ["triggerer"])
    _wait_until(lambda: 5 in _watched_epochs(stack), 180,
                lambda: (_watched_epochs(stack), stack.log_tail(owner)))
    _wait_until(lambda: _delivered_through(stack_zk[1]) == 5, 60, lambda: _delivered_through(stack_zk[1]))
    time.sleep(8)  # room for a late duplicate
    assert _watched_epochs(stack) == [1, 2, 3, 4, 5]
    _wait_until(lambda: len([r for r in stack.runs("watched_consumer") if r["state"] == "success"])
                > runs_before, 120, lambda: stack.runs("watched_consumer"))
    consumed = stack.query("SELECT x.value FROM xcom x WHERE x.dag_id = %s AND x.task_id = %s",
                           "watched_consumer", "consume")
    epochs = sorted(e for (value,) in consumed for e in (json.loads(value) if isinstance(value, str) else value))
    assert epochs.count(5) == 1, epochs


def test_a_trigger_runner_that_dies_hands_the_watcher_to_the_other_triggerer(stack, stack_zk):
    """The watcher's trigger runner (the triggerer's child process that runs the triggers) is killed -9,
    its triggerer process left alone. Airflow 3.3's supervisor sees the runner's exit and ends the
    triggerer: its job does not go on heartbeating with the watcher assigned to it and not running.
    The other triggerer takes the watcher over and delivers the next seal, once."""
    ledger = EpochLedger(stack_zk[1], "watched", owner="outside")
    _wait_until(lambda: stack.watcher_triggerer() is not None, 60, lambda: "no triggerer owns the watcher")
    _wait_until(lambda: _delivered_through(stack_zk[1]) == 5, 60, lambda: _delivered_through(stack_zk[1]))
    owner = stack.watcher_triggerer()
    other = "triggerer-2" if owner == "triggerer" else "triggerer"
    if other not in stack.procs or stack.procs[other].poll() is not None:
        stack.spawn(other, ["triggerer"])
    _wait_until(lambda: len(stack.query("SELECT id FROM job WHERE job_type = 'TriggererJob' AND state = 'running'"))
                >= 2, 120, lambda: stack.query("SELECT id, state FROM job WHERE job_type = 'TriggererJob'"))
    os.kill(stack.trigger_runner(owner), signal.SIGKILL)
    stack.procs[owner].wait(60)  # the triggerer ends with its runner (a timeout here fails the test)
    assert "Trigger runner process has died" in stack.log_tail(owner, 1_000_000)
    _seal(ledger, 6)
    _wait_until(lambda: 6 in _watched_epochs(stack), 180,
                lambda: (_watched_epochs(stack), stack.log_tail(other)))
    time.sleep(8)  # room for a late duplicate
    assert _watched_epochs(stack) == [1, 2, 3, 4, 5, 6]
    assert stack.watcher_triggerer() == other


def _watched_payloads(stack: AirflowStack) -> list[dict]:
    rows = stack.query("SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.uri = %s",
                       "epochs://watched/daily")
    return [(json.loads(extra) if isinstance(extra, str) else extra)["payload"] for (extra,) in rows]


def test_a_resealed_key_gives_one_asset_event_naming_its_version_under_the_scheduler(stack, stack_zk):
    """A correction of a key the watcher delivered long ago: the re-sealed version 2 becomes exactly one
    more asset event (``version`` 2, its ``dedupe_key`` ending in ``/v2``), and the consumer runs for it;
    nothing is delivered twice (runs after the tests above, or alone)."""
    from airflow_epochs.coordination import PipelineConfig, PipelineExists

    ledger = EpochLedger(stack_zk[1], "watched", owner="outside")
    with contextlib.suppress(PipelineExists):  # the tests above created it, or this one runs alone
        ledger.create_pipeline(PipelineConfig({"daily": ("job",)}))
    stack.wait_for_dags(["watched_consumer"])
    stack.unpause("watched_consumer")
    for epoch in range(ledger.frontier() + 1, 3):
        _seal(ledger, epoch)
    frontier = ledger.frontier()
    _wait_until(lambda: _delivered_through(stack_zk[1]) == frontier, 240,
                lambda: (_delivered_through(stack_zk[1]), stack.log_tail("triggerer")))
    runs_before = len(stack.runs("watched_consumer"))
    opened = ledger.corrections.reseal(1, "daily", reason="corrected input")
    assert ledger.corrections.vote_version(1, "daily", opened.version, "job", {"rows": 100}).sealed

    def resealed() -> list[dict]:
        return [p for p in _watched_payloads(stack) if p.get("version", 1) > 1]

    _wait_until(lambda: resealed(), 180, lambda: (_watched_payloads(stack), stack.log_tail("triggerer")))
    _wait_until(lambda: len(stack.runs("watched_consumer")) > runs_before, 180,
                lambda: (stack.runs("watched_consumer"), stack.log_tail("scheduler")))
    time.sleep(8)  # room for a late duplicate
    found = resealed()
    assert len(found) == 1, found
    assert (found[0]["epoch"], found[0]["version"], found[0]["correction"]) == (1, opened.version, opened.correction)
    assert found[0]["dedupe_key"] == f"watched/daily/1/1/v{opened.version}"
    assert all(p.get("version", 1) == 1 for p in _watched_payloads(stack) if p not in found)
