"""Re-runs of declared producers: which try of a task instance succeeded, and each re-run after the
seal recorded once in the pipeline's history.

A staged vote's request id is its task instance (dag_id, run_id, task_id, map_index), so every try of
one task instance repeats the same vote. That is right for a retry after a kill -9 (the try that
voted never reported success), and wrong for a try started by ``airflow tasks clear`` after the
task had succeeded: that is a re-run. Try numbers alone cannot tell them apart, so the listener marks
the vote once its try has **reported success**: ``<staged vote>/succeeded`` holds the highest such try
(:class:`SucceededMark`). A later try of the same task instance than the mark's is a cleared re-run;
with no mark (the try that voted was killed before success), it is a retry.

A re-run after the seal (cleared, or another task instance) is recorded in the history as a
:class:`ProducerRerun` event, with a create-only marker ``<staged vote>/reruns/<id>`` in the same
transaction, so a repeat of the same re-run (its try killed and retried) records it once. The id of a
cleared re-run is ``<request>-t<succeeded try>``: every try after the same success is the same re-run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError

from airflow_epochs.coordination.base.call import Call, Conflict
from airflow_epochs.coordination.base.steps import Create, SetData
from airflow_epochs.coordination.declared.records import SucceededMark
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.protocol.config_store import ensure_path
from airflow_epochs.coordination.wire.events import ProducerRerun


def _mark_path(staged: str) -> str:
    return f"{staged}/succeeded"


def succeeded_try(ledger: EpochLedger, staged: str, task_instance: Mapping[str, Any]) -> int | None:
    """The highest try of ``task_instance`` that reported success after staging the vote at ``staged``
    (None: none did, or the mark is another task instance's)."""
    path = _mark_path(staged)

    def body(call: Call) -> int | None:
        raw = call.get(path)
        if raw is None:
            return None
        mark = SucceededMark.from_bytes(raw.data, path=path)
        return mark.try_number if dict(mark.task_instance) == dict(task_instance) else None

    return ledger.ctx.call(body, what=f"read {path}")


def mark_succeeded(ledger: EpochLedger, staged: str, task_instance: Mapping[str, Any], try_number: int) -> None:
    """Record that ``try_number`` of ``task_instance`` reported success (never lowers a higher try of
    the same task instance; another task instance's mark is replaced: the staged vote is now its)."""
    path = _mark_path(staged)
    wanted = SucceededMark(dict(task_instance), try_number)

    def body(call: Call) -> None:
        raw = call.get(path)
        if raw is None:
            if call.exists(staged) is None:
                return  # pruned with retention: nothing to mark
            failure = call.try_commit([Create(path, wanted.to_bytes())])
            if failure is not None and not isinstance(failure.error, NodeExistsError):
                raise failure.error
            if failure is not None:
                raise Conflict()  # another try marked it first: decide again
            return
        there = SucceededMark.from_bytes(raw.data, path=path)
        if dict(there.task_instance) == dict(task_instance) and there.try_number >= try_number:
            return
        failure = call.try_commit([SetData(path, wanted.to_bytes(), int(raw.stat.version))])
        if failure is not None and isinstance(failure.error, BadVersionError):
            raise Conflict()
        if failure is not None:
            raise failure.error

    ledger.ctx.call(body, what=f"mark {path}")


def record_rerun(ledger: EpochLedger, staged: str, rerun_id: str, event: ProducerRerun) -> bool:
    """Record ``event`` in the history once per ``rerun_id`` (False: already recorded)."""
    folder = f"{staged}/reruns"
    marker = f"{folder}/{rerun_id}"

    def body(call: Call) -> bool:
        ensure_path(call, folder)
        failure = call.try_commit([Create(marker, b""), *ledger.ctx.event(event)])
        if failure is None:
            return True
        if isinstance(failure.error, NodeExistsError):
            return False
        raise failure.error

    def find(call: Call) -> bool | None:  # after a lost answer: did this record commit?
        return True if call.exists(marker) is not None else None

    return bool(ledger.ctx.call(body, what=f"record the re-run {rerun_id}", find=find))
