"""Declared producers: ordinary Airflow tasks (or assets) vote through the provider's listener.

- the declaration: bad input is refused naming the value; it round-trips through the stored config;
- staged votes against a real ZooKeeper: keys completed out of order seal in epoch order, a repeat
  adds nothing, another run before the seal changes nothing, a re-run after the seal is reported and,
  with ``reopen``, rolls the key back and seals it again;
- plain producer DAGs run with ``dag.test()``: their votes come from the listener, an undeclared task
  writes nothing, a re-run of the same task instance repeats its vote;
- the gate's trigger: one event per complete key with the producers' key, the next key held until
  the consumer acknowledged the previous one.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from declared_sales import DECLARED

from airflow_epochs.coordination import EpochLedger, InvalidInput
from airflow_epochs.coordination.declared.reruns import succeeded_try
from airflow_epochs.coordination.declared.staging import staged_votes
from airflow_epochs.coordination.declared.votes import StageOutcome, TaskInstanceId, drain, stage_vote
from airflow_epochs.coordination.wire.declared import Match

pytestmark = pytest.mark.integration


def _ti(dag_id: str, run: str) -> TaskInstanceId:
    return TaskInstanceId(dag_id, run, "load")


# -- the declaration ----------------------------------------------------------------------------------








# -- staged votes on a real ZooKeeper -----------------------------------------------------------------


@pytest.fixture
def ledger(zk) -> EpochLedger:
    ledger = EpochLedger(zk, "declared", owner="declared-producers")
    ledger.create_pipeline(DECLARED.pipeline_config())
    return ledger


def _vote(ledger: EpochLedger, producer: str, key: str, ti: TaskInstanceId, **kw) -> str:
    outcome = stage_vote(ledger, Match("sales", producer, key), ti, **kw)
    drain(ledger)
    return outcome.status


def test_keys_completed_out_of_order_seal_in_epoch_order(ledger):
    # key 2 is complete first: it waits, staged, for key 1
    for producer in ("eu", "us", "returns"):
        assert _vote(ledger, producer, "2026-01-02", _ti(f"prod_{producer}", "r2")) == "staged"
    assert ledger.frontier() == 0 and ledger.epoch_info(2) is None
    assert len(staged_votes(ledger, 2)) == 3
    # key 1's last producer seals key 1, then the staged key 2
    _vote(ledger, "eu", "2026-01-01", _ti("prod_eu", "r1"))
    _vote(ledger, "us", "2026-01-01", _ti("prod_us", "r1"))
    assert ledger.frontier() == 0
    _vote(ledger, "returns", "2026-01-01", _ti("prod_returns", "r1"))
    assert ledger.frontier() == 2
    seal = ledger.seal(2, "sales")
    assert seal is not None and seal.manifests["eu"] == {
        "task_instance": {"dag_id": "prod_eu", "run_id": "r2", "task_id": "load", "map_index": -1},
        "partition_key": "2026-01-02"}
    # key 3 incomplete: nothing opens it for good, nothing seals it
    _vote(ledger, "eu", "2026-01-03", _ti("prod_eu", "r3"))
    assert ledger.frontier() == 2 and (ledger.epoch_info(3) is None or ledger.epoch_info(3).state == "open")


def test_repeats_add_nothing_and_reruns_are_reported(ledger):
    for producer in ("eu", "us"):
        _vote(ledger, producer, "2026-01-01", _ti(f"prod_{producer}", "r1"))
    assert _vote(ledger, "eu", "2026-01-01", _ti("prod_eu", "r1")) == "repeat"  # a retry: same instance
    assert _vote(ledger, "eu", "2026-01-01", _ti("prod_eu", "again")) == "other_run"  # before the seal
    events = len(ledger.history())
    assert _vote(ledger, "returns", "2026-01-01", _ti("prod_returns", "r1")) == "staged"
    assert ledger.frontier() == 1
    assert len(ledger.history()) > events
    events = len(ledger.history())
    # after the seal: reported (once in the history, however often it repeats), the seal unchanged
    assert _vote(ledger, "us", "2026-01-01", _ti("prod_us", "late")) == "rerun_after_seal"
    assert _vote(ledger, "us", "2026-01-01", _ti("prod_us", "late")) == "rerun_after_seal"
    assert _vote(ledger, "us", "2026-01-01", _ti("prod_us", "r1")) == "repeat"
    history = ledger.history()
    assert [e.event for e in history[events:]] == ["producer_rerun"]
    assert history[-1].record.task_instance["run_id"] == "late" and not history[-1].record.cleared
    assert ledger.seal(1, "sales").generation == 1
    # with reopen: the key is rolled back and sealed again, as generation 2, with the re-run's vote
    assert _vote(ledger, "us", "2026-01-01", _ti("prod_us", "late"), reopen=True) == "reopened"
    assert ledger.frontier() == 1
    seal = ledger.seal(1, "sales")
    assert seal.generation == 2 and seal.manifests["us"]["task_instance"]["run_id"] == "late"
    assert [e.event for e in ledger.history(since_seq=-1)].count("rollback") == 1


def test_a_producer_outside_the_configuration_at_its_epoch_is_refused_before_any_write(ledger):
    with pytest.raises(InvalidInput, match="partition key 'someday' is neither"):
        stage_vote(ledger, Match("sales", "eu", "someday"), _ti("prod_eu", "r"))
    with pytest.raises(InvalidInput, match="producer 'nobody' of partition 'sales' is not in the configuration"):
        stage_vote(ledger, Match("sales", "nobody", "2026-01-01"), _ti("prod_eu", "r"))
    assert staged_votes(ledger, 1) == []


# -- the listener, in real DAG runs -------------------------------------------------------------------


@pytest.fixture
def declared_env(monkeypatch, zk_connection, zk):
    # a pipeline named there but never created is skipped with a warning; it fails no task
    monkeypatch.setenv("AIRFLOW__EPOCHS__DECLARED_PIPELINES", "declared,not_created")
    ledger = EpochLedger(zk, "declared", owner="setup")
    ledger.create_pipeline(DECLARED.pipeline_config())
    return ledger


def _run(dagbag, dag_id: str, key: str, run_id: str | None = None):
    return dagbag.get_dag(dag_id).test(run_conf={"key": key}, **({"run_id": run_id} if run_id else {}))


def test_plain_producer_dags_vote_through_the_listener(dagbag, declared_env, caplog):
    ledger = declared_env
    # an undeclared DAG with a partitioned outlet writes nothing
    assert "success" in str(_run(dagbag, "prod_other", "2026-01-01").state)
    assert not ledger.client.exists(f"{ledger.paths.base}/declared")
    assert "pipeline not_created named in [epochs] declared_pipelines" in caplog.text
    for dag_id in ("prod_us", "prod_returns"):
        assert "success" in str(_run(dagbag, dag_id, "2026-01-01").state)
    assert ledger.frontier() == 0
    run = _run(dagbag, "prod_eu", "2026-01-01")
    assert "success" in str(run.state)
    assert ledger.frontier() == 1
    seal = ledger.seal(1, "sales")
    assert seal.manifests["eu"]["task_instance"] == {"dag_id": "prod_eu", "run_id": run.run_id, "task_id": "load",
                                                     "map_index": -1}
    # its success marked the vote as succeeded by its try (a later try of it would be a cleared re-run)
    staged = StageOutcome("declared", "sales", "eu", "2026-01-01", 1, "", {}).staged_path(ledger.paths)
    assert succeeded_try(ledger, staged, seal.manifests["eu"]["task_instance"]) == 1
    # another run of a producer for the sealed key: reported in the task's log, the seal unchanged
    caplog.clear()
    assert "success" in str(_run(dagbag, "prod_us", "2026-01-01").state)
    assert "Declared producer ran again AFTER the seal" in caplog.text
    assert ledger.seal(1, "sales").generation == 1 and ledger.frontier() == 1


# -- the gate's trigger -------------------------------------------------------------------------------


async def _collect(trigger, count: int, timeout: float) -> list[dict]:
    events: list[dict] = []

    async def take() -> None:
        async for event in trigger.run():
            events.append(event.payload)
            if len(events) >= count:
                return

    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(take(), timeout)
    return events


def test_the_gate_delivers_each_complete_key_once_and_holds_the_next_until_acknowledged(zk_connection, zk):
    from airflow_epochs.triggers.declared import DeclaredKeyEventTrigger

    ledger = EpochLedger(zk, "declared", owner="declared-producers")
    ledger.create_pipeline(DECLARED.pipeline_config())
    for day in ("2026-01-01", "2026-01-02"):
        for producer in ("eu", "us", "returns"):
            _vote(ledger, producer, day, _ti(f"prod_{producer}", day))
    assert ledger.frontier() == 2

    def trigger():
        return DeclaredKeyEventTrigger(pipeline="declared", partition="sales", consumer="report", scope="t")

    first = asyncio.run(_collect(trigger(), 2, 4.0))
    assert [(e["partition_key"], e["epoch"]) for e in first] == [("2026-01-01", 1)]  # key 2 held back
    ledger.consumer("report").register(acked=1)
    ledger.consumer("report").acknowledge(1)
    second = asyncio.run(_collect(trigger(), 2, 4.0))
    assert [(e["partition_key"], e["epoch"]) for e in second] == [("2026-01-02", 2)]  # key 1 not again
    assert second[0]["dedupe_key"] == "declared/sales/2/1/" + str(second[0]["attempt"])


def test_two_consumers_of_one_partition_in_one_scope_each_get_every_key(zk_connection, zk):
    """Each consumer's cursor is its own: with one cursor per scope, the first consumer to receive a key
    moved it past that key for the other, which then never got it."""
    from airflow_epochs.triggers.declared import DeclaredKeyEventTrigger

    ledger = EpochLedger(zk, "declared", owner="declared-producers")
    ledger.create_pipeline(DECLARED.pipeline_config())
    for day in ("2026-01-01", "2026-01-02"):
        for producer in ("eu", "us", "returns"):
            _vote(ledger, producer, day, _ti(f"prod_{producer}", day))

    def trigger(consumer: str) -> DeclaredKeyEventTrigger:
        return DeclaredKeyEventTrigger(pipeline="declared", partition="sales", consumer=consumer, scope="t")

    for consumer in ("report", "audit"):
        got = asyncio.run(_collect(trigger(consumer), 2, 4.0))
        assert [(e["partition_key"], e["epoch"]) for e in got] == [("2026-01-01", 1)], consumer
    ledger.consumer("report").register(acked=1)
    ledger.consumer("report").acknowledge(1)
    assert [e["epoch"] for e in asyncio.run(_collect(trigger("report"), 2, 4.0))] == [2]
    assert asyncio.run(_collect(trigger("audit"), 1, 2.0)) == []  # audit has not acknowledged key 1
    ledger.consumer("audit").register(acked=1)
    ledger.consumer("audit").acknowledge(1)
    assert [e["epoch"] for e in asyncio.run(_collect(trigger("audit"), 2, 4.0))] == [2]
    assert asyncio.run(_collect(trigger("report"), 1, 2.0)) == []  # report's key 2 is not delivered again


def test_staged_votes_are_pruned_with_retention_and_a_late_rerun_writes_nothing(zk):
    ledger = EpochLedger(zk, "pruned", owner="declared-producers")
    ledger.create_pipeline(DECLARED.pipeline_config(retain_epochs=2))
    for day in range(1, 7):
        for producer in ("eu", "us", "returns"):
            _vote(ledger, producer, f"2026-01-0{day}", _ti(f"prod_{producer}", str(day)))
    assert ledger.frontier() == 6
    kept = sorted(int(n) for n in zk.get_children(f"{ledger.paths.base}/declared"))
    assert kept == [4, 5, 6], kept  # bounded: retain_epochs behind the frontier
    assert _vote(ledger, "eu", "2026-01-01", _ti("prod_eu", "late")) == "rerun_after_seal"
    assert sorted(int(n) for n in zk.get_children(f"{ledger.paths.base}/declared")) == kept
