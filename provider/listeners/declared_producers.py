"""The listener that turns ordinary producer tasks into votes of declared producers.

Registered by the provider's plugin (``EpochsPlugin.listeners``), so every task process of the
deployment loads it. When a task with outlets starts (``on_task_instance_running``, in the task's own
process), it arms the task's post-execute step; after ``execute`` returned, and **before** the task
reports success, that step reads the task's outlet events and their partition keys (``add_partitions``
or the run's partition key), and for each event that a declared producer of a configured pipeline
stands for, stages the vote and casts every staged vote in epoch order
(:mod:`airflow_epochs.coordination.declared.votes`). A task with no outlets, or whose events no
declaration names, writes nothing.

Why before success: a vote cast after success (``on_task_instance_success`` runs after the success is
reported, and the asset listeners of the API server after it is committed) is lost for good if the
process is killed -9 in between, and Airflow never runs the task again. Voting first, a kill -9 after
the vote leaves the task not successful: Airflow retries it and the retry repeats the vote (its request
id is the task instance), which adds nothing. A vote that cannot be cast (ZooKeeper unreachable past
the retry budget) fails the task, naming the declaration (pipeline, partition, producer, key), so
that success always means the vote is in.

Once the try has reported success (``on_task_instance_success``), its votes are marked as succeeded by
that try: a later try of the same task instance (``airflow tasks clear``) is then known as a re-run,
reported (log and history) and, with ``reopen_on_rerun``, reopens the key; a try with no such mark
before it is a retry (:mod:`airflow_epochs.coordination.declared.reruns`).

Settings (``[epochs]`` in airflow.cfg, or ``AIRFLOW__EPOCHS__...``):

- ``declared_pipelines``: comma-separated pipelines whose declared producers this deployment votes for
  (none: the listener does nothing);
- ``declared_zookeeper_conn_id``: the ZooKeeper connection (default ``zookeeper_default``);
- ``declared_root``: the pipelines' root znode (default ``/airflow-epochs``);
- ``reopen_on_rerun``: ``true`` to roll a sealed key back when a producer runs again for it (the
  consumer then gets the key again); ``reseal`` to re-seal the key's partition as a new version instead
  (no later epoch is undone; see ``EpochLedger.reseal``); default ``false``: the re-run is logged and
  changes nothing.
- ``declared_cache_dir`` (default ``$AIRFLOW_HOME/epochs``) and ``declared_check_timeout`` (seconds,
  default 5): the host's cached filter of declared producers, checked against ZooKeeper (one
  ``exists`` per pipeline) when it answers within the timeout and used as it is when it does not. A
  task no declaration names votes nothing and succeeds, ZooKeeper up or down
  (:mod:`airflow_epochs.listeners.declared_filter`);
- ``declared_vote_budget``: seconds a vote is retried while ZooKeeper cannot be reached before the
  task fails (default 60).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from airflow.listeners import hookimpl

from airflow_epochs.coordination.base.paths import DEFAULT_ROOT
from airflow_epochs.listeners.declared_filter import FilterCacheError, ProducerFilter, load, store
from airflow_epochs.listeners.declared_filter import describe as describe_source

log = logging.getLogger(__name__)

OWNER = "declared-producers"
SECTION = "epochs"


def _setting(key: str, default: str) -> str:
    value = os.environ.get(f"AIRFLOW__{SECTION.upper()}__{key.upper()}")
    if value is not None:
        return value
    try:
        from airflow.configuration import conf

        return str(conf.get(SECTION, key, fallback=default))
    except Exception as exc:  # noqa: BLE001 - no configuration reachable: the default, said out loud
        log.warning("cannot read [%s] %s from Airflow's configuration (%s: %s); using %r", SECTION, key,
                    type(exc).__name__, exc, default)
        return default


def declared_pipelines() -> list[str]:
    """The pipelines named by ``[epochs] declared_pipelines``."""
    return [name.strip() for name in _setting("declared_pipelines", "").split(",") if name.strip()]


def outlet_events(task: Any, context: Any) -> list[tuple[str, str]]:
    """``(asset URI, partition key)`` of each partitioned outlet event the task recorded."""
    recorded = context.get("outlet_events")
    if recorded is None:
        return []
    dag_run = context.get("dag_run")
    run_key = getattr(dag_run, "partition_key", None)
    events: list[tuple[str, str]] = []
    for outlet in getattr(task, "outlets", None) or ():
        uri = getattr(outlet, "uri", None)
        if not isinstance(uri, str) or not hasattr(outlet, "name"):
            continue  # aliases and references are resolved by Airflow; declare the concrete asset
        keys: Iterable[str] = recorded[outlet].partition_keys or ((run_key,) if run_key else ())
        events.extend((uri, key) for key in sorted(keys))
    return events


class DeclaredVoteNotCast(Exception):
    """A declared producer's vote could not be cast (or it could not be told whether the task is one):
    the task fails, so that its success always means its vote is in. The message names the declaration."""


def deployment_source() -> tuple[str, str, tuple[str, ...]]:
    """What the filter is read for: the connection (its id and where it points: hosts and chroot, from
    Airflow's connection, not from ZooKeeper), the root, the pipelines. A cached filter of other
    settings is not used."""
    conn_id = _setting("declared_zookeeper_conn_id", "zookeeper_default")
    try:
        from airflow_epochs.hooks.zookeeper import ZooKeeperHook

        where = ZooKeeperHook(conn_id).settings.connect_string
    except Exception as exc:  # noqa: BLE001 - unresolvable: no cached filter matches it, said out loud
        log.warning("Declared producers: cannot resolve connection %s (%s: %s)", conn_id, type(exc).__name__, exc)
        where = "?"
    return (f"{conn_id}={where}", _setting("declared_root", DEFAULT_ROOT), tuple(declared_pipelines()))


def cache_dir() -> Path:
    """Where this host keeps the filter of declared producers (``[epochs] declared_cache_dir``)."""
    home = os.environ.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return Path(_setting("declared_cache_dir", str(Path(home) / "epochs")))


def _seconds(key: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"[epochs] {key} must be a number of seconds, not {raw!r}") from None
    if not 0 <= value <= 86400:
        raise ValueError(f"[epochs] {key} must be 0..86400 seconds, not {raw!r}")
    return value


def _check_timeout() -> float:
    return _seconds("declared_check_timeout", _setting("declared_check_timeout", "5"))


def _cached(source: tuple[str, str, tuple[str, ...]]) -> ProducerFilter | None:
    try:
        cached = load(cache_dir())
    except FilterCacheError as exc:
        log.warning("Declared producers: the cached filter is not used: %s", exc)
        return None
    return cached if cached is not None and cached.source == source else None


def _current(source: tuple[str, str, tuple[str, ...]], cached: ProducerFilter | None) -> ProducerFilter:
    """The filter as ZooKeeper has it now (one connection, waiting at most ``declared_check_timeout``):
    the declarations' marks first (one ``exists`` per pipeline); the cached filter if they are those
    it was read with, else every declaration read again and the filter cached with those marks. The
    marks are read before the declarations, so a declaration changed in between leaves marks that
    the next task sees differ: it reads again."""
    from airflow_epochs.coordination import InvalidConfig, PipelineNotFound
    from airflow_epochs.coordination.declared.votes import declaration, declaration_mark
    from airflow_epochs.hooks.zookeeper import ZooKeeperHook

    conn_id, root, pipelines = source
    conn_id = conn_id.split("=", 1)[0]
    declarations: dict[str, Any] = {}
    with ZooKeeperHook(conn_id, connect_timeout=_check_timeout()) as hook:
        ledgers = {pipeline: hook.ledger(pipeline, owner=OWNER, root=root) for pipeline in pipelines}
        marks = {pipeline: declaration_mark(ledger) for pipeline, ledger in ledgers.items()}
        if cached is not None and cached.current(marks):
            return cached
        for pipeline, ledger in ledgers.items():
            try:
                declarations[pipeline] = declaration(ledger)
            except (PipelineNotFound, InvalidConfig) as exc:
                log.warning("Declared producers: pipeline %s named in [epochs] declared_pipelines: %s", pipeline, exc)
                declarations[pipeline] = None
    fresh = ProducerFilter(source, declarations, time.time(), marks)
    log.info("Declared producers: read the declarations of %s (the host's filter was %s)", list(pipelines),
             "missing" if cached is None else "out of date")
    try:
        store(cache_dir(), fresh)
    except (OSError, FilterCacheError) as exc:  # the filter still decides for this task; later ones read again
        log.warning("Declared producers: cannot cache the filter in %s: %s", cache_dir(), exc)
    return fresh


def _producer_filter(source: tuple[str, str, tuple[str, ...]], what: str) -> ProducerFilter:
    """The filter to decide with: checked against ZooKeeper when it answers; the cached one when it
    does not (see :mod:`airflow_epochs.listeners.declared_filter`)."""
    cached = _cached(source)
    from kazoo.exceptions import KazooException

    from airflow_epochs.coordination import CoordinationUnavailable

    try:
        return _current(source, cached)
    except (CoordinationUnavailable, KazooException) as exc:
        if cached is None:
            raise DeclaredVoteNotCast(
                f"cannot tell whether {what} is a declared producer of {describe_source(source)}: no filter "
                f"cached in {cache_dir()} and ZooKeeper unreachable ({type(exc).__name__}: {exc}); a declared "
                "producer never succeeds without its vote") from exc
        log.warning("Declared producers: ZooKeeper unreachable (%s); deciding with the host's filter, read %.0f s "
                    "ago", exc, time.time() - cached.fetched_at)
        return cached


def vote_for_outlets(task_instance: Any, context: Any) -> list[Any]:
    """Stage and cast the votes the task's outlet events stand for; returns the stage outcomes.

    Only a task that the local filter (:mod:`airflow_epochs.listeners.declared_filter`) names as a
    declared producer contacts ZooKeeper; see there for a stale or missing filter.
    """
    pipelines = declared_pipelines()
    events = outlet_events(task_instance.task, context)
    if not pipelines or not events:
        return []
    source = deployment_source()
    what = f"task {task_instance.dag_id}.{task_instance.task_id} (run {task_instance.run_id})"
    named = _producer_filter(source, what).matches(task_instance.dag_id, task_instance.task_id, events)
    if not named:
        return []
    from airflow_epochs.coordination import InvalidConfig, PipelineNotFound
    from airflow_epochs.coordination.base.retrying import Backoff, call_with_retries, describe
    from airflow_epochs.coordination.declared.votes import TaskInstanceId, declaration, drain, stage_vote
    from airflow_epochs.hooks.zookeeper import ZooKeeperHook

    ti = TaskInstanceId(task_instance.dag_id, task_instance.run_id, task_instance.task_id,
                        int(getattr(task_instance, "map_index", -1) if task_instance.map_index is not None else -1))
    tried = getattr(task_instance, "try_number", None)
    tried = tried if isinstance(tried, int) and not isinstance(tried, bool) else None
    on_rerun = _setting("reopen_on_rerun", "false").strip().lower()
    reopen, reseal = on_rerun in ("1", "true", "yes", "on"), on_rerun == "reseal"
    conn_id, root = source[0].split("=", 1)[0], source[1]
    budget = _seconds("declared_vote_budget", _setting("declared_vote_budget", "60"))
    outcomes: list[Any] = []

    def on_retry(exc: BaseException, retry: int, pause: float, left: float) -> None:
        log.warning("Declared producer vote: %s; trying again in %.1f s (%.0f s left)", describe(exc), pause, left)

    try:
        with ZooKeeperHook(conn_id) as hook:
            for pipeline in named:

                def step(pipeline: str = pipeline) -> list[Any]:
                    ledger = hook.ledger(pipeline, owner=OWNER, root=root)
                    try:
                        declared = declaration(ledger)
                    except (PipelineNotFound, InvalidConfig) as exc:
                        # no longer declared there (the cached filter was older): not a producer of it
                        log.warning("Declared producers: pipeline %s named in [epochs] declared_pipelines: %s",
                                    pipeline, exc)
                        return []
                    matches = declared.matches(ti.dag_id, ti.task_id, events)
                    done = [stage_vote(ledger, match, ti, reopen=reopen, reseal=reseal, try_number=tried)
                            for match in matches]
                    if done:
                        drained = drain(ledger)
                        if drained.sealed:
                            log.info("Pipeline %s: sealed epoch(s) %s", pipeline, list(drained.sealed))
                        if drained.waiting is not None:
                            log.info("Pipeline %s: epoch %s waits for more declared producers", pipeline,
                                     drained.waiting)
                    return done

                for outcome in call_with_retries(step, backoff=Backoff(budget=budget), on_retry=on_retry):
                    _report(outcome)
                    outcomes.append(outcome)
                    if tried is not None and outcome.staged_by.get("ti") == ti.to_json():  # the staged vote is ours
                        _TO_MARK.append((conn_id, root, outcome, ti, tried))
    except Exception as exc:
        cast = {(o.pipeline, o.partition, o.producer, o.key) for o in outcomes}
        missing = [f"pipeline {p!r} partition {m.partition!r} producer {m.producer!r} key {m.key!r}"
                   for p, matched in named.items() for m in matched if (p, m.partition, m.producer, m.key) not in cast]
        raise DeclaredVoteNotCast(f"the vote of {what} as declared producer ({'; '.join(missing) or 'see cause'}) "
                                  f"was not cast: {type(exc).__name__}: {exc}") from exc
    return outcomes


# The votes this task process staged (its one try), marked as succeeded once the try reported success.
_TO_MARK: list[tuple[str, str, Any, Any, int]] = []


def mark_succeeded_votes() -> int:
    """Mark every vote this task process cast as succeeded by its try (see
    :mod:`airflow_epochs.coordination.declared.reruns`); returns how many. Runs after the
    success was reported: a failure here is logged and fails nothing (the next try of this task
    instance is then taken for a retry, as without marks)."""
    from airflow_epochs.coordination.declared.reruns import mark_succeeded
    from airflow_epochs.hooks.zookeeper import ZooKeeperHook

    marked = 0
    pending = list(_TO_MARK)
    _TO_MARK.clear()
    try:
        for conn_id, root, outcome, ti, tried in pending:
            with ZooKeeperHook(conn_id, connect_timeout=_check_timeout()) as hook:
                ledger = hook.ledger(outcome.pipeline, owner=OWNER, root=root)
                mark_succeeded(ledger, outcome.staged_path(ledger.paths), ti.to_json(), tried)
                marked += 1
    except Exception as exc:  # noqa: BLE001 - the task has succeeded; a lost mark only hides a later re-run
        log.warning("Declared producers: cannot mark %d vote(s) as succeeded (%s: %s); a later clear of this task "
                    "will be taken for a retry", len(pending) - marked, type(exc).__name__, exc)
    return marked


def _report(outcome: Any) -> None:
    where = (f"pipeline {outcome.pipeline!r} partition {outcome.partition!r} producer {outcome.producer!r} "
             f"key {outcome.key!r} (epoch {outcome.epoch})")
    first = outcome.staged_by.get("ti")
    if outcome.status in ("staged", "repeat"):
        log.info("Declared producer vote %s: %s", outcome.status, where)
    elif outcome.status == "other_run":
        log.warning("Declared producer ran again before the seal: %s; the vote of %s stands", where, first)
    elif outcome.status == "rerun_after_seal" and outcome.cleared_after is not None:
        log.warning("Declared producer ran again AFTER the seal: %s, cleared after its try %d succeeded; the "
                    "consumer is not triggered again (set [epochs] reopen_on_rerun = true to reopen the key)",
                    where, outcome.cleared_after)
    elif outcome.status == "rerun_after_seal":
        log.warning("Declared producer ran again AFTER the seal: %s, first produced by %s; the consumer is not "
                    "triggered again (set [epochs] reopen_on_rerun = true to reopen the key)", where, first)
    elif outcome.status == "reopened" and outcome.cleared_after is not None:
        log.warning("Declared producer ran again after the seal: %s, cleared after its try %d succeeded; the key "
                    "was rolled back and is sealed again (reopen_on_rerun)", where, outcome.cleared_after)
    elif outcome.status == "resealed":
        log.warning("Declared producer ran again after the seal: %s%s; the key's partition was re-sealed as a new "
                    "version (reopen_on_rerun = reseal)", where, "" if outcome.cleared_after is None else
                    f", cleared after its try {outcome.cleared_after} succeeded")
    elif outcome.status == "reopened":
        log.warning("Declared producer ran again after the seal: %s; the key was rolled back and is sealed "
                    "again (reopen_on_rerun)", where)


def _armed(task_instance: Any, previous: Callable[..., Any]) -> Callable[..., Any]:
    def post_execute(context: Any, *args: Any, **kwargs: Any) -> Any:
        result = previous(context, *args, **kwargs)
        vote_for_outlets(task_instance, context)
        return result

    post_execute.epochs_declared_vote = True  # type: ignore[attr-defined]
    return post_execute


@hookimpl
def on_task_instance_running(previous_state: Any, task_instance: Any) -> None:
    """Arm the vote of a task that may be a declared producer (it has outlets) to run after its
    ``execute`` and before its success is reported."""
    _TO_MARK.clear()  # a new try: nothing of an earlier task in this process is marked by its success
    task = getattr(task_instance, "task", None)
    if task is None or not getattr(task, "outlets", None) or not declared_pipelines():
        return
    current = task.post_execute
    if getattr(current, "epochs_declared_vote", False):
        return
    task.post_execute = _armed(task_instance, current)


@hookimpl
def on_task_instance_success(previous_state: Any, task_instance: Any) -> None:
    """Mark the votes this try cast as succeeded by it (a later try of the same task instance is then
    a cleared re-run)."""
    if _TO_MARK:
        mark_succeeded_votes()
