"""Issue 36's duplicate report run after a takeover, on a real ZooKeeper, through the operators.

Two deployments run the same DAG, so their open tasks for one run and try derive the SAME request id
(``task_request_id``: dag, run, task, try). The standby's takeover once found the stopped leader's
attempt by that id and carried on under it (same fencing token, the stopped deployment's owner), so
the stopped deployment's close, run again after its restart, found "its" attempt sealed and emitted the
epoch's asset events too: the report DAG ran in both deployments. The takeover must supersede (a new
token, the standby's owner), and the close of the attempt that did not seal must skip, emitting nothing.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowSkipException
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_epochs.coordination import Attempt, AttemptSuperseded, PipelineConfig
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.operators.epoch import (
    CloseEpochOperator,
    OpenEpochOperator,
    partition_asset,
    task_request_id,
)

pytestmark = [pytest.mark.integration]
CONN = "zk_takeover_report"
PIPELINE = "takeover-report"
CONFIG = {"partitions": {"daily": ["join"]}}


def _ti(task_id: str, pushed: dict[str, Any]) -> SimpleNamespace:
    # the same DAG run and try in both deployments (each has its own metadata database)
    return SimpleNamespace(dag_id="nycflights_daily", run_id="scheduled__2013-01-02T00:00:00+00:00",
                           task_id=task_id, map_index=-1, try_number=1,
                           xcom_pull=lambda task_ids: pushed.get(task_ids))


def _open(owner: str) -> dict[str, Any]:
    operator = OpenEpochOperator(task_id="open", pipeline=PIPELINE, epoch=1, config=CONFIG, lease_seconds=2.0,
                                 deferrable=False, owner_id=owner, zookeeper_conn_id=CONN)
    return operator.execute({"ti": _ti("open", {})})  # type: ignore[arg-type]


def _close(attempt: dict[str, Any]) -> tuple[str, OutletEventAccessors]:
    operator = CloseEpochOperator(task_id="close", pipeline=PIPELINE, partitions=["daily"], attempt_task_id="open",
                                  zookeeper_conn_id=CONN)
    events = OutletEventAccessors()
    try:
        operator.execute({"ti": _ti("close", {"open": attempt}), "outlet_events": events})  # type: ignore[arg-type]
    except AirflowSkipException as skipped:
        return f"skipped: {skipped}", events
    except Exception as exc:  # noqa: BLE001 - reported by the assertion, from the thread that ran it
        return f"raised: {exc!r}", events
    return "success", events


def test_a_takeover_supersedes_and_only_the_sealing_deployment_emits_the_epoch(monkeypatch, zk_server, zk_chroot,
                                                                               airflow_home):
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", zk_server.connection_json(zk_chroot))
    # the collision itself: one request id for both deployments' open tasks
    assert task_request_id({"ti": _ti("open", {})}) == task_request_id({"ti": _ti("open", {})})  # type: ignore[arg-type]

    first = _open("first")  # the first deployment opens epoch 1, then is stopped (it never renews its lease)
    second = _open("second")  # the standby waits out the 2 s lease in the worker, then takes the epoch over
    assert (first["owner"], first["token"]) == ("first", 1)
    assert (second["owner"], second["token"]) == ("second", 2)  # was ("first", 1): the first's attempt reused

    with ZooKeeperHook(CONN) as hook:
        stale = hook.ledger(PIPELINE, owner="first")
        with pytest.raises(AttemptSuperseded):  # fencing: the stopped leader's straggler cannot vote
            stale.vote(Attempt.from_dict(first), "daily", "join", {"rows": 1})
        sealing = hook.ledger(PIPELINE, owner="second")
        sealing.vote(Attempt.from_dict(second), "daily", "join", {"rows": 1})  # the takeover's join seals it
        info = sealing.epoch_info(1)
        assert (info.state, info.owner, info.attempt) == ("sealed", "second", 2)

    # Both closes at once (the first deployment restarted as the second closes): exactly one emits.
    results: dict[str, tuple[str, OutletEventAccessors]] = {}
    threads = [threading.Thread(target=lambda n=n, a=a: results.__setitem__(n, _close(a)))
               for n, a in (("first", first), ("second", second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    asset = partition_asset(PIPELINE, "daily")
    state, events = results["second"]
    assert state == "success" and events[asset].partition_keys == {"1"}
    assert events[asset].extra["attempt"] == 2
    state, events = results["first"]
    assert state == "skipped: Pipeline takeover-report: epoch 1 was sealed by second (attempt 2), not by attempt 1; " \
                    "skipping, no asset event"
    assert events[asset].partition_keys == set() and not events[asset].extra


def test_the_same_deployment_repeating_its_open_request_still_gets_its_own_attempt(monkeypatch, zk_server,
                                                                                    zk_chroot, airflow_home):
    """The control: the request id still makes one owner's repeat idempotent (no new attempt)."""
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", zk_server.connection_json(zk_chroot))
    with ZooKeeperHook(CONN) as hook:
        hook.ledger(PIPELINE, owner="first").create_pipeline(PipelineConfig.from_json(CONFIG))
    once = _open("first")
    again = _open("first")
    assert (again["owner"], again["token"]) == (once["owner"], once["token"]) == ("first", 1)
