"""Opening an epoch from a task: shared by :class:`~airflow_epochs.operators.OpenEpochOperator` and by the
first tasks of an :class:`~airflow_epochs.operators.EpochGroup` that opens its epoch in them
(``inline_stages=True``).

Before the decision (:func:`~airflow_epochs.hooks.epoch_opening.open_epoch`) the DAG's definition of the
pipeline is applied: the pipeline is created with it if missing; with ``from_epoch`` it is scheduled as a
new configuration version from that epoch (once, whoever opens: the request id is the definition's own);
and when the configuration the epoch runs under differs from it, the task says how, in a warning.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_epochs.coordination import (
    ConfigConflict,
    EpochLedger,
    PipelineConfig,
    PipelineNotFound,
    validate_name,
)
from airflow_epochs.coordination.base.calendar import Calendar
from airflow_epochs.hooks.epoch_opening import open_epoch
from airflow_epochs.hooks.zookeeper import ZooKeeperHook
from airflow_epochs.operators.definition import differences
from airflow_epochs.retries import templated_epoch
from airflow_epochs.triggers.backpressure import ConsumersCaughtUpTrigger
from airflow_epochs.triggers.frontier import FrontierReachedTrigger

if TYPE_CHECKING:
    import logging

    from airflow.sdk import Context
    from airflow.sdk.bases.operator import BaseOperator

    from airflow_epochs.coordination.services.coordinator import OpenDecision

__all__ = ["DEPLOYMENT_ENV", "Opening", "default_owner", "open_in_task", "task_request_id"]

DEPLOYMENT_ENV = "AIRFLOW_EPOCHS_DEPLOYMENT"


def default_owner() -> str:
    """This deployment's identity: ``$AIRFLOW_EPOCHS_DEPLOYMENT``, else the host name."""
    raw = os.environ.get(DEPLOYMENT_ENV) or socket.gethostname()
    return "".join(ch if ch.isalnum() or ch in "_.-" else "-" for ch in raw)[:128]


def task_request_id(context: Context, *, per_try: bool = True, scope: str | None = None) -> str:
    """A request id naming this task instance (and, with ``per_try``, this try of it).

    Repeating a coordination call with it (a retry inside the same try, a lost answer) never
    applies the call twice; a new try gets a new id, so it starts a new attempt instead of sharing
    the old try's fencing token with a process that may still be running.

    :param scope: instead of the task, name this run's ``scope`` (e.g. an EpochGroup's opening, shared
        by its first tasks) and the number of times the run was cleared: every task and try of one run
        shares it, and clearing the run starts anew.
    """
    ti = context["ti"]
    if scope is not None:
        dag_run = context.get("dag_run")
        parts = [ti.dag_id, ti.run_id, scope, str(getattr(dag_run, "clear_number", 0) or 0)]
    else:
        parts = [ti.dag_id, ti.run_id, ti.task_id, str(getattr(ti, "map_index", -1))]
        if per_try:
            parts.append(str(ti.try_number))
    return "ti-" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:40]


@dataclass(frozen=True)
class Opening:
    """How a pipeline's epochs are opened: the settings of an open task (rendered when it runs).

    :param pipeline: pipeline name.
    :param epoch: the epoch (templated); None: from the run's data interval through ``calendar``, else
        the next epoch after the frontier.
    :param config: the pipeline's configuration as JSON (the DAG's definition): created with it if
        missing, and compared with the stored one.
    :param from_epoch: the first epoch the DAG's definition applies to, when it changes an existing
        pipeline: scheduled as a configuration version from there (it must not be opened yet).
    """

    pipeline: str
    epoch: int | str | None = None
    calendar: Calendar | None = None
    config: Mapping[str, Any] | None = None
    from_epoch: int | None = None
    lease_seconds: float = 600.0
    backpressure_wait: float | None = None
    deferrable: bool = False
    owner_id: str | None = None
    zookeeper_conn_id: str = ZooKeeperHook.default_conn_name
    root: str = "/airflow-epochs"

    def epoch_for(self, epoch: int | str | None, context: Context, ledger: EpochLedger) -> int:
        if epoch not in (None, ""):
            return templated_epoch(epoch)
        start = context.get("data_interval_start")
        if self.calendar is not None and start is not None:
            return self.calendar.epoch_for(start)
        return ledger.frontier() + 1


def _definition_request(pipeline: str, from_epoch: int, config: PipelineConfig) -> str:
    """One request id per (pipeline, from_epoch, definition): every task and deployment that schedules the
    same definition from the same epoch makes one configuration version."""
    text = json.dumps([pipeline, from_epoch, config.to_json()], sort_keys=True)
    return "define-" + hashlib.sha256(text.encode()).hexdigest()[:40]


def create_if_missing(ledger: EpochLedger, opening: Opening) -> None:
    """Create the pipeline with the DAG's definition if it is missing (before anything reads it: an epoch
    chosen as the frontier's next, on a run with no logical date, reads the pipeline)."""
    if opening.config is not None:
        ledger.create_pipeline(PipelineConfig.from_json(opening.config))


def apply_definition(ledger: EpochLedger, opening: Opening, epoch: int, log: logging.Logger) -> None:
    """Schedule the DAG's definition from ``from_epoch``, and say how the configuration ``epoch`` runs
    under differs from it (a warning naming each difference); the pipeline exists (:func:`create_if_missing`)."""
    if opening.config is None:
        return
    defined = PipelineConfig.from_json(opening.config)
    scheduled = False
    if opening.from_epoch is not None:
        if not differences(ledger.config_for(opening.from_epoch).config, defined):
            scheduled = True
        else:
            try:
                version = ledger.set_config(defined, from_epoch=opening.from_epoch,
                                            request_id=_definition_request(ledger.pipeline, opening.from_epoch,
                                                                           defined))
                scheduled = True
                log.info("Pipeline %s: the DAG's definition is configuration version %s from epoch %s",
                         ledger.pipeline, version.version, version.from_epoch)
            except ConfigConflict as exc:
                log.warning("Pipeline %s: the DAG's definition cannot start at from_epoch=%s: %s", ledger.pipeline,
                            opening.from_epoch, exc)
    current = ledger.config_for(epoch)
    changed = differences(current.config, defined)
    if not changed:
        return
    if scheduled and opening.from_epoch is not None and opening.from_epoch > epoch:
        log.info("Pipeline %s: epoch %s runs under configuration version %s; the DAG's definition applies from "
                 "epoch %s (%s)", ledger.pipeline, epoch, current.version, opening.from_epoch, "; ".join(changed))
        return
    log.warning("Pipeline %s: epoch %s runs under the stored configuration version %s (from epoch %s), which "
                "differs from this DAG's definition: %s. The stored one applies; to apply the DAG's from an epoch "
                "not opened yet, give the EpochGroup from_epoch=N (or run ReconfigureOperator)", ledger.pipeline,
                epoch, current.version, current.from_epoch, "; ".join(changed))


def open_in_task(task: BaseOperator, context: Context, opening: Opening, *, epoch: int | str | None,
                 epoch_wanted: int | None, deadline: float | None, request_id: str, resume_method: str,
                 log: logging.Logger) -> dict[str, Any]:
    """Decide, and open, skip or defer (``task.defer(..., method_name=resume_method)``): the XCom of an
    opened epoch (its attempt, the snapshots a retry starts from and the definition it runs under).

    ``deadline`` is the backpressure deadline as a wall-clock time: it travels through deferral
    (another process, another clock); here it becomes this process's one monotonic deadline.
    """
    owner = validate_name("owner", opening.owner_id or default_owner())
    local = None if deadline is None else time.monotonic() + max(0.0, deadline - time.time())
    with ZooKeeperHook(zookeeper_conn_id=opening.zookeeper_conn_id) as hook:
        ledger = hook.ledger(opening.pipeline, owner=owner, root=opening.root)
        try:
            create_if_missing(ledger, opening)
            chosen = epoch_wanted or opening.epoch_for(epoch, context, ledger)
            apply_definition(ledger, opening, chosen, log)
            decision = open_epoch(ledger, chosen, lease_duration=datetime.timedelta(seconds=opening.lease_seconds),
                                  request_id=request_id, wait_in_worker=not opening.deferrable,
                                  backpressure_deadline=local, log=log)
            runs_under = ledger.config_for(chosen).config if decision.action == "opened" else None
        except PipelineNotFound:
            raise AirflowFailException(f"pipeline {opening.pipeline!r} does not exist; pass config= to create it, "
                                       "or open it from an EpochGroup (its tasks define it)") from None
    if decision.action == "opened":
        assert runs_under is not None
        return _opened(opening.pipeline, chosen, owner, decision, runs_under, log)
    if decision.action == "sealed":
        sealed = decision.sealed
        message = (f"Pipeline {opening.pipeline}: epoch {chosen} is already sealed by "
                   f"{sealed.owner if sealed else '?'} (attempt {sealed.attempt if sealed else -1}); skipping")
        log.info(message)
        raise AirflowSkipException(message)
    kwargs = {"epoch_wanted": chosen, "backpressure_deadline": deadline}
    if decision.action == "backpressured" and (local is None or time.monotonic() < local):
        assert decision.wait_for_consumers is not None  # a backpressured decision names the epoch
        task.defer(trigger=ConsumersCaughtUpTrigger(pipeline=opening.pipeline, epoch=decision.wait_for_consumers,
                                                    deadline=deadline, root=opening.root,
                                                    zookeeper_conn_id=opening.zookeeper_conn_id),
                   method_name=resume_method, kwargs=kwargs)
    if decision.action == "backpressured":
        raise AirflowFailException(f"gave up after waiting {opening.backpressure_wait:g} s for "
                                   f"backpressure: {decision.reason}")
    assert decision.wait_for_frontier is not None  # a wait decision names the epoch it waits for
    task.defer(trigger=FrontierReachedTrigger(pipeline=opening.pipeline, epoch=decision.wait_for_frontier,
                                              give_up_after=decision.wait_seconds, root=opening.root,
                                              zookeeper_conn_id=opening.zookeeper_conn_id),
               method_name=resume_method, kwargs=kwargs)
    raise AssertionError("defer() returns only by raising")  # pragma: no cover


def _opened(pipeline: str, epoch: int, owner: str, decision: OpenDecision, runs_under: PipelineConfig,
            log: logging.Logger) -> dict[str, Any]:
    attempt = decision.attempt
    assert attempt is not None
    if decision.took_over is not None:
        log.info("Pipeline %s: %s took over epoch %s from %s (attempt %s supersedes %s)", pipeline, owner, epoch,
                 decision.took_over.owner, attempt.token, decision.took_over.attempt)
    log.info("Pipeline %s: epoch %s open under attempt %s of %s (config version %s)", pipeline, epoch,
             attempt.token, attempt.owner, attempt.config_version)
    snapshots = {p: {producer: {"epoch": r.epoch, "pointer": r.pointer} for producer, r in refs.items()}
                 for p, refs in decision.snapshots.items()}
    definition = {"partitions": {p: list(m) for p, m in runs_under.partitions.items()},
                  "barriers": {b: list(m) for b, m in runs_under.barriers.items()}}
    return {**attempt.to_dict(), "snapshots": snapshots, "definition": definition}
