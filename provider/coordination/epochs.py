"""The epoch state machine: creating a pipeline, configuration versions, opening epochs (new, resumed,
taken over, reopened after a rollback), aborting attempts, and rollback.

Every change is one multi-op transaction guarded by znode versions, carries its history record and
a request id, and is found again by that id after a lost answer:

- an opening writes the id into the new attempt node (``a-<token>``);
- an abort writes it into the aborted attempt node;
- pipeline-level changes (configuration, rollback) create ``requests/<id>`` holding their result.

A new epoch opens in two requests on the happy path: one read of the pipeline record, one
transaction that checks the previous epoch's seal exists (so epochs open in order) and bumps the
record's version (so openings, configuration changes and rollbacks serialise).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from airflow_epochs.coordination import payloads
from airflow_epochs.coordination.acl import verify_pipeline_acls
from airflow_epochs.coordination.config import ConfigVersion, PipelineConfig
from airflow_epochs.coordination.errors import (
    AttemptSuperseded,
    Backpressured,
    ConfigConflict,
    CorruptPayload,
    EpochAlreadyOpen,
    EpochAlreadySealed,
    EpochNotOpen,
    EpochOutOfOrder,
    InvalidConfig,
    InvalidEpoch,
    PipelineExists,
    RollbackRefused,
)
from airflow_epochs.coordination.history import commit
from airflow_epochs.coordination.names import MAX_EPOCH, validate_epoch
from airflow_epochs.coordination.paths import parse_attempt_key
from airflow_epochs.coordination.pipeline import PipelineContext, PipelineRecord, encode_config
from airflow_epochs.coordination.reader import (
    attempt_record,
    consumer_acks,
    epoch_record,
    frontier,
    frontier_with_stat,
    snapshots_at,
)
from airflow_epochs.coordination.records import Attempt
from airflow_epochs.coordination.session import Call, Conflict, Op, first_failure

MAX_ROLLBACK_EPOCHS = 1000
MAX_REASON = 500

_CONFLICTS = (BadVersionError, NodeExistsError, NoNodeError)


def _failed(results: Sequence[Any]) -> tuple[int, BaseException] | None:
    return first_failure(results)


def _commit_or_conflict(call: Call, ops: Sequence[Op]) -> list[Any]:
    """Commit; a lost race on a version or a create-only node means "decide again"."""
    results = commit(call, ops)
    failure = _failed(results)
    if failure is None:
        return results
    if isinstance(failure[1], _CONFLICTS):
        raise Conflict()
    raise failure[1]


def _stored_result(call: Call, ctx: PipelineContext) -> Any:
    """The result a pipeline-level request stored under ``requests/<id>``, or None if it is not there."""
    raw = call.get(ctx.paths.request(call.request_id))
    if raw is None:
        return None
    return payloads.decode("request", raw[0], path=ctx.paths.request(call.request_id)).get("result")


def _request_op(ctx: PipelineContext, call: Call, what: str, result: Any) -> Op:
    return ("create", ctx.paths.request(call.request_id),
            payloads.encode("request", {"call": what, "at": ctx.clock(), "result": result}), False)


# -- pipeline and configuration --------------------------------------------------------------------


def create_pipeline(
    ctx: PipelineContext, config: PipelineConfig, *, first_epoch: int = 1, exist_ok: bool = True,
    request_id: str | None = None,
) -> ConfigVersion:
    """Create the pipeline's subtree with its first configuration version (see ``EpochLedger``)."""
    if not isinstance(config, PipelineConfig):
        raise InvalidConfig(f"config must be a PipelineConfig, not {type(config).__name__}")
    validate_epoch(first_epoch, what="first_epoch")
    p = ctx.paths
    encoded_config = encode_config(config, first_epoch)

    def existing(call: Call, record: PipelineRecord) -> ConfigVersion:
        return ctx.config_for(call, max(first_epoch, record.first_epoch), record)

    def body(call: Call) -> ConfigVersion:
        # A subtree someone else created (and can write) is never adopted: checked on every round,
        # so a creation racing with ours is checked too.
        verify_pipeline_acls(ctx.client, p)
        raw = call.get(p.base)
        if raw is not None:
            record = ctx.record(call)
            if record.request == call.request_id:
                return existing(call, record)
            if not exist_ok:
                raise PipelineExists(f"pipeline {ctx.pipeline!r} exists already under {p.root}")
            return existing(call, record)
        if call.exists(p.root) is None:
            _ensure_path(call, p.root)
        now = ctx.clock()
        record_doc = {"first_epoch": first_epoch, "newest_epoch": first_epoch - 1, "configs": [[0, first_epoch]],
                      "compacted_through": first_epoch - 1, "created_at": now, "request": call.request_id}
        ops: list[Op] = [
            ("create", p.base, payloads.encode("pipeline", record_doc), False),
            ("create", p.config_dir, b"", False),
            ("create", p.config(0), encoded_config, False),
            ("create", p.epochs, b"", False),
            ("create", p.frontier, payloads.encode("frontier", {"epoch": first_epoch - 1}), False),
            ("create", p.history, b"", False),
            ("create", p.snapshots, b"", False),
            ("create", p.requests, b"", False),
            ("create", p.consumers, b"", False),
            ("create", p.locks, b"", False),
            *ctx.event("pipeline_created", first_epoch=first_epoch, config=config.to_json()),
        ]
        _commit_or_conflict(call, ops)
        return ConfigVersion(0, first_epoch, config)

    def find(call: Call) -> ConfigVersion | None:
        raw = call.get(p.base)
        if raw is None:
            return None
        record = ctx.record(call)
        return existing(call, record) if record.request == call.request_id else None

    return ctx.call(body, what=f"create pipeline {ctx.pipeline!r}", request_id=request_id, find=find)


def _ensure_path(call: Call, path: str) -> None:
    """Create ``path`` and its missing parents (empty znodes); a concurrent creator is fine."""
    parts = [seg for seg in path.split("/") if seg]
    current = ""
    for seg in parts:
        current += "/" + seg
        if call.exists(current) is None:
            results = commit(call, [("create", current, b"", False)])
            failure = _failed(results)
            if failure is not None and not isinstance(failure[1], NodeExistsError):
                raise failure[1]


def set_configs(
    ctx: PipelineContext, changes: Sequence[tuple[PipelineConfig, int]], *, request_id: str | None = None
) -> list[ConfigVersion]:
    """Schedule several configuration versions in one transaction (see ``EpochLedger.set_configs``)."""
    if not changes:
        raise InvalidConfig("no configuration changes given")
    encoded: list[bytes] = []
    for config, from_epoch in changes:
        if not isinstance(config, PipelineConfig):
            raise InvalidConfig(f"config must be a PipelineConfig, not {type(config).__name__}")
        validate_epoch(from_epoch, what="from_epoch")
        encoded.append(encode_config(config, from_epoch))

    def result_of(stored: Any) -> list[ConfigVersion]:
        return [ConfigVersion(int(v), int(f), config) for (v, f), (config, _) in zip(stored, changes, strict=True)]

    def body(call: Call) -> list[ConfigVersion]:
        record = ctx.record(call)
        for _, from_epoch in changes:
            if from_epoch <= record.newest_epoch:
                raise ConfigConflict(
                    f"pipeline {ctx.pipeline!r}: a configuration for epoch {from_epoch} must start after the newest "
                    f"opened epoch {record.newest_epoch}; nothing was written"
                )
            if from_epoch < record.first_epoch:
                raise ConfigConflict(
                    f"pipeline {ctx.pipeline!r} starts at epoch {record.first_epoch}; from_epoch {from_epoch} is "
                    "before it; nothing was written"
                )
        start = max(v for v, _ in record.configs) + 1
        new = [(start + i, from_epoch) for i, (_, from_epoch) in enumerate(changes)]
        ops: list[Op] = [
            ("set", ctx.paths.base, payloads.encode("pipeline", record.body(
                configs=[*[list(c) for c in record.configs], *[list(c) for c in new]])), record.version),
            _request_op(ctx, call, "set_configs", [list(c) for c in new]),
        ]
        for (version, from_epoch), raw, (config, _) in zip(new, encoded, changes, strict=True):
            ops += [("create", ctx.paths.config(version), raw, False),
                    *ctx.event("config_set", from_epoch=from_epoch, version=version, config=config.to_json())]
        _commit_or_conflict(call, ops)
        ctx.known_record = None
        return result_of(new)

    def find(call: Call) -> list[ConfigVersion] | None:
        stored = _stored_result(call, ctx)
        return None if stored is None else result_of(stored)

    return ctx.call(body, what=f"set the configuration of {ctx.pipeline!r}", request_id=request_id, find=find)


# -- opening -----------------------------------------------------------------------------------


def open_epoch(
    ctx: PipelineContext,
    epoch: int,
    *,
    takeover: bool = False,
    request_id: str | None = None,
    on_consumer_change: Callable[[], None] | None = None,
) -> Attempt:
    """Open ``epoch`` (or resume the attempt of this request, or supersede a stale one); see
    ``EpochLedger.open_epoch`` for the rules."""
    validate_epoch(epoch)
    p = ctx.paths
    tried: list[int] = []  # tokens this call tried to create (to find them after a lost answer)

    def handle(call: Call, token: int, doc: dict[str, Any]) -> Attempt:
        return Attempt(ctx.pipeline, epoch, token, str(doc["owner"]), int(doc["config_version"]),
                       int(doc["generation"]), call.request_id, float(doc["opened_at"]), ctx.session.session_id)

    rounds = [0]

    def body(call: Call) -> Attempt:
        rounds[0] += 1
        known = ctx.known_record
        # First round of an opening that follows this context's own: try it on the record as written
        # then (no read); any change since makes the transaction fail, and the next round reads.
        optimistic = rounds[0] == 1 and known is not None and epoch == known.newest_epoch + 1
        record = known if optimistic and known is not None else ctx.record(call)
        if epoch <= record.compacted_through:
            raise EpochAlreadySealed(f"pipeline {ctx.pipeline!r}: epoch {epoch} is sealed (and compacted)")
        if epoch > record.newest_epoch:
            opened = _open_new(call, record)
            if opened is not None:
                return opened
        return _open_existing(call, record)

    def _open_new(call: Call, record: PipelineRecord) -> Attempt | None:
        """The happy path: epoch = newest + 1, assumed never opened before (else None: the slow path)."""
        if epoch != record.newest_epoch + 1:
            raise _out_of_order(call, record)
        version = ctx.config_for(call, epoch, record)
        checks = _backpressure(call, version, on_consumer_change)
        now = ctx.clock()
        doc = {"state": "open", "attempt": 1, "owner": ctx.owner, "config_version": version.version,
               "generation": 1, "opened_at": now}
        ops: list[Op] = [
            ("set", p.base, payloads.encode("pipeline", record.body(newest_epoch=epoch)), record.version),
            *checks,
            ("create", p.epoch(epoch), payloads.encode("epoch", doc), False),
            *_attempt_ops(call, 1, version, now, created=()),
            ("create", p.seals(epoch, 1), b"", False),
            *ctx.event("epoch_opened", epoch=epoch, attempt=1, owner=ctx.owner, config_version=version.version,
                       generation=1),
        ]
        check_previous = epoch - 1 > record.compacted_through  # a compacted epoch is sealed by definition
        if check_previous:
            ops.insert(1, ("check", p.epoch_seal(epoch - 1), -1))
        tried.append(1)
        results = commit(call, ops)
        failure = _failed(results)
        if failure is None:
            ctx.known_record = replace(record, newest_epoch=epoch, version=int(results[0].version))
            return handle(call, 1, doc)
        index, error = failure
        ctx.known_record = None
        if index == 0 and isinstance(error, BadVersionError):
            raise Conflict()  # another opening, configuration change or rollback came first
        if check_previous and index == 1 and isinstance(error, NoNodeError):
            raise _out_of_order(call, record)
        if isinstance(error, NodeExistsError) and ops[index][1] == p.epoch(epoch):
            return None  # opened before and rolled back: reopen it as a new generation
        if isinstance(error, _CONFLICTS):
            raise Conflict()  # a consumer acknowledged meanwhile: decide again
        raise error

    def _open_existing(call: Call, record: PipelineRecord) -> Attempt:
        found = epoch_record(call, ctx, epoch)
        if found is None:
            raise CorruptPayload(f"{p.epoch(epoch)}: epoch {epoch} <= newest {record.newest_epoch} is missing")
        doc, stat = found
        token = int(doc["attempt"])
        current = attempt_record(call, ctx, epoch, token)
        if current is not None and current[0]["request"] == call.request_id:
            return handle(call, token, doc)
        if doc["state"] == "sealed":
            raise EpochAlreadySealed(
                f"pipeline {ctx.pipeline!r}: epoch {epoch} is sealed (attempt {token} by {doc['owner']!r}); only a "
                "recorded rollback can reopen it"
            )
        if doc["state"] == "rolled_back":
            return _reopen(call, record, doc, stat.version, current)
        if current is None:
            raise CorruptPayload(f"{p.attempt(epoch, token)}: the current attempt of epoch {epoch} is missing")
        running = current[0]["state"] == "running"
        if running and doc["owner"] != ctx.owner and not takeover:
            raise EpochAlreadyOpen(
                f"pipeline {ctx.pipeline!r}: epoch {epoch} is open under attempt {token} of {doc['owner']!r}",
                owner=str(doc["owner"]), attempt=token,
            )
        # A new attempt: the old one was aborted, or it is superseded (a takeover, or this owner
        # starting over: a same-named replacement never shares a possible zombie's token).
        new_token = token + 1
        version = ctx.config(call, int(doc["config_version"]))
        generation = int(doc["generation"])
        sealed = set(call.children(p.seals(epoch, generation)) or [])
        now = ctx.clock()
        new_doc = {**payloads.body(doc), "attempt": new_token, "owner": ctx.owner}
        old_path = p.attempt(epoch, token)
        fence_old: Op = ("check", old_path, current[1].version)
        if running:
            fence_old = ("set", old_path, payloads.encode("attempt", {
                **payloads.body(current[0]), "state": "superseded", "superseded_by": new_token,
                "changed_by": call.request_id}), current[1].version)
        ops: list[Op] = [
            fence_old,
            ("set", p.epoch(epoch), payloads.encode("epoch", new_doc), stat.version),
            *_attempt_ops(call, new_token, version, now, created=sealed),
            *ctx.event("attempt_started", epoch=epoch, attempt=new_token, owner=ctx.owner, superseded=token,
                       previous_state=current[0]["state"], generation=generation),
        ]
        tried.append(new_token)
        _commit_or_conflict(call, ops)
        return handle(call, new_token, new_doc)

    def _reopen(call: Call, record: PipelineRecord, doc: dict[str, Any], version_no: int,
                current: tuple[dict[str, Any], Any] | None) -> Attempt:
        """A rolled-back epoch opens again as a new generation, in order, under today's configuration."""
        if epoch != record.newest_epoch + 1:
            raise _out_of_order(call, record)
        version = ctx.config_for(call, epoch, record)
        checks = _backpressure(call, version, on_consumer_change)
        generation = int(doc["generation"]) + 1
        token = int(doc["attempt"]) + 1
        now = ctx.clock()
        new_doc = {"state": "open", "attempt": token, "owner": ctx.owner, "config_version": version.version,
                   "generation": generation, "opened_at": now}
        ops: list[Op] = [
            ("set", p.base, payloads.encode("pipeline", record.body(newest_epoch=epoch)), record.version),
            *checks,
            ("set", p.epoch(epoch), payloads.encode("epoch", new_doc), version_no),
            *_attempt_ops(call, token, version, now, created=()),
            ("create", p.seals(epoch, generation), b"", False),
            *ctx.event("epoch_opened", epoch=epoch, attempt=token, owner=ctx.owner, config_version=version.version,
                       generation=generation),
        ]
        check_previous = epoch - 1 > record.compacted_through
        if check_previous:
            ops.insert(1, ("check", p.epoch_seal(epoch - 1), -1))
        tried.append(token)
        results = commit(call, ops)
        failure = _failed(results)
        if failure is None:
            return handle(call, token, new_doc)
        index, error = failure
        if check_previous and index == 1 and isinstance(error, NoNodeError):
            raise _out_of_order(call, record)
        if isinstance(error, _CONFLICTS):
            raise Conflict()
        raise error

    def _attempt_ops(call: Call, token: int, version: ConfigVersion, now: float, *, created: Any) -> list[Op]:
        """The attempt node and a vote counter for each partition of several producers still to seal
        (not those in ``created``); a sole producer's vote is its partition's seal and needs none."""
        ops: list[Op] = [("create", p.attempt(epoch, token), payloads.encode("attempt", {
            "token": token, "owner": ctx.owner, "started_at": now, "request": call.request_id,
            "state": "running"}), False)]
        for partition, producers in version.config.partitions.items():
            if partition not in created and len(producers) > 1:
                ops.append(("create", p.vote_counter(epoch, token, partition), b"", False))
        return ops

    def _out_of_order(call: Call, record: PipelineRecord) -> EpochOutOfOrder:
        now_frontier = frontier(call, ctx)
        still_open = f" (epoch {now_frontier + 1} is open and must be sealed first)" \
            if record.newest_epoch > now_frontier else ""
        return EpochOutOfOrder(
            f"pipeline {ctx.pipeline!r}: cannot open epoch {epoch}: the frontier is {now_frontier}, so the next "
            f"epoch to open is {now_frontier + 1}{still_open}; nothing was written"
        )

    def _backpressure(call: Call, version: ConfigVersion, watch: Callable[[], None] | None) -> list[Op]:
        window = version.config.window
        if window is None:
            return []
        acks = consumer_acks(call, ctx, (lambda _event: watch()) if watch is not None else None)
        if not acks:
            return []
        slowest = min(acks, key=lambda name: acks[name][0])
        acked = acks[slowest][0]
        if epoch > acked + window:
            raise Backpressured(
                f"pipeline {ctx.pipeline!r}: epoch {epoch} waits for consumer {slowest!r}, which acknowledged "
                f"epoch {acked}; the window is {window}, so epochs up to {acked + window} may open",
                consumer=slowest, acked=acked, window=window,
            )
        # The opening fails if any consumer's acknowledgement (or registration) changes meanwhile.
        return [("check", ctx.paths.consumer(name), v) for name, (_, v) in acks.items()]

    def find(call: Call) -> Attempt | None:
        for token in reversed(tried):
            found = attempt_record(call, ctx, epoch, token)
            if found is not None and found[0]["request"] == call.request_id:
                record = epoch_record(call, ctx, epoch)
                if record is None:
                    return None
                return handle(call, token, record[0])
        return None

    def find_any(call: Call) -> Attempt | None:
        """A caller-supplied request id may name an attempt opened by an earlier call."""
        names = call.children(p.epoch(epoch)) or []
        for token in sorted((t for t in (parse_attempt_key(n) for n in names) if t is not None), reverse=True):
            found = attempt_record(call, ctx, epoch, token)
            if found is not None and found[0]["request"] == call.request_id:
                record = epoch_record(call, ctx, epoch)
                if record is None:
                    return None
                if int(record[0]["attempt"]) != token:
                    raise AttemptSuperseded(
                        f"pipeline {ctx.pipeline!r}: request {call.request_id!r} opened attempt {token} of epoch "
                        f"{epoch}, which is {found[0]['state']} (the current attempt is {record[0]['attempt']}); "
                        "nothing was written",
                        attempt=token, current=int(record[0]["attempt"]),
                    )
                return handle(call, token, record[0])
        return None

    # A caller-supplied id may name an attempt opened by an earlier call: look through them all.
    return ctx.call(body, what=f"open epoch {epoch} of {ctx.pipeline!r}", request_id=request_id,
                    find=find_any if request_id is not None else find)


def current_attempt(ctx: PipelineContext, epoch: int) -> Attempt:
    """The epoch's current attempt (to hand it to another process); raises if it is not open."""
    validate_epoch(epoch)

    def body(call: Call) -> Attempt:
        found = epoch_record(call, ctx, epoch)
        if found is None:
            if ctx.record(call).compacted_through >= epoch:
                raise EpochAlreadySealed(f"pipeline {ctx.pipeline!r}: epoch {epoch} is sealed (and compacted)")
            raise EpochNotOpen(f"pipeline {ctx.pipeline!r}: epoch {epoch} has not been opened")
        doc = found[0]
        if doc["state"] != "open":
            raise EpochNotOpen(f"pipeline {ctx.pipeline!r}: epoch {epoch} is {doc['state']}, not open")
        token = int(doc["attempt"])
        att = attempt_record(call, ctx, epoch, token)
        return Attempt(ctx.pipeline, epoch, token, str(doc["owner"]), int(doc["config_version"]),
                       int(doc["generation"]), str(att[0]["request"]) if att else "", float(doc["opened_at"]),
                       None)

    return ctx.call(body, what=f"read the current attempt of epoch {epoch}")


# -- abort -------------------------------------------------------------------------------------


def abort_attempt(ctx: PipelineContext, attempt: Attempt, *, reason: str = "", request_id: str | None = None) -> None:
    """Abort the current attempt: its token can no longer vote; the epoch stays open for a new one."""
    path = ctx.paths.attempt(attempt.epoch, attempt.token)

    def body(call: Call) -> bool:
        att = attempt_record(call, ctx, attempt.epoch, attempt.token)
        found = epoch_record(call, ctx, attempt.epoch)
        if found is None or att is None:
            raise EpochNotOpen(f"pipeline {ctx.pipeline!r}: attempt {attempt.token} of epoch {attempt.epoch} "
                               "does not exist")
        doc = found[0]
        if att[0]["state"] == "aborted" and att[0].get("changed_by") == call.request_id:
            return True
        if doc["state"] == "sealed" and int(doc["attempt"]) == attempt.token:
            raise EpochAlreadySealed(
                f"pipeline {ctx.pipeline!r}: epoch {attempt.epoch} is sealed by attempt {attempt.token}; it cannot "
                "be aborted; nothing was written"
            )
        if att[0]["state"] != "running" or int(doc["attempt"]) != attempt.token or doc["state"] != "open":
            raise AttemptSuperseded(
                f"pipeline {ctx.pipeline!r}: attempt {attempt.token} of epoch {attempt.epoch} is "
                f"{att[0]['state']} (the epoch is {doc['state']} under attempt {doc['attempt']}); nothing was written",
                attempt=attempt.token, current=int(doc["attempt"]),
            )
        new = {**payloads.body(att[0]), "state": "aborted", "reason": str(reason)[:MAX_REASON],
               "changed_by": call.request_id}
        _commit_or_conflict(call, [
            ("set", path, payloads.encode("attempt", new), att[1].version),
            *ctx.event("attempt_aborted", epoch=attempt.epoch, attempt=attempt.token, owner=attempt.owner,
                       reason=str(reason)[:MAX_REASON]),
        ])
        return True

    def find(call: Call) -> bool | None:
        att = attempt_record(call, ctx, attempt.epoch, attempt.token)
        if att is not None and att[0]["state"] == "aborted" and att[0].get("changed_by") == call.request_id:
            return True
        return None

    ctx.call(body, what=f"abort attempt {attempt.token} of epoch {attempt.epoch}", request_id=request_id,
             find=find)


# -- rollback ----------------------------------------------------------------------------------


def rollback(ctx: PipelineContext, to_epoch: int, *, reason: str, request_id: str | None = None) -> list[int]:
    """Roll back every epoch after ``to_epoch`` (sealed or open) and move the frontier to it; see
    ``EpochLedger.rollback``. Recorded once per request id: a repeat returns the first result."""
    if isinstance(to_epoch, bool) or not isinstance(to_epoch, int) or not 0 <= to_epoch <= MAX_EPOCH:
        raise InvalidEpoch(f"to_epoch must be an integer in 0..{MAX_EPOCH}, not {to_epoch!r}")
    if not isinstance(reason, str) or not reason.strip():
        raise RollbackRefused("a rollback needs a reason; it is recorded in the history; nothing was written")
    p = ctx.paths

    def body(call: Call) -> list[int]:
        record = ctx.record(call)
        current_frontier, frontier_stat = frontier_with_stat(call, ctx)
        newest = record.newest_epoch
        if to_epoch < record.first_epoch - 1:
            raise RollbackRefused(
                f"pipeline {ctx.pipeline!r} starts at epoch {record.first_epoch}; cannot roll back to {to_epoch}"
            )
        if to_epoch < record.compacted_through:
            raise RollbackRefused(
                f"pipeline {ctx.pipeline!r}: epochs up to {record.compacted_through} are compacted; cannot roll "
                f"back to {to_epoch} (keep more epochs with retain_epochs)"
            )
        if to_epoch > current_frontier:
            raise RollbackRefused(
                f"pipeline {ctx.pipeline!r}: can only roll back to a sealed epoch; {to_epoch} is after the frontier "
                f"{current_frontier}"
            )
        if to_epoch >= newest:
            raise RollbackRefused(
                f"pipeline {ctx.pipeline!r}: nothing after epoch {to_epoch} to roll back (newest epoch {newest})"
            )
        epochs = list(range(to_epoch + 1, newest + 1))
        if len(epochs) > MAX_ROLLBACK_EPOCHS:
            raise RollbackRefused(
                f"rolling back {len(epochs)} epochs at once exceeds {MAX_ROLLBACK_EPOCHS}; roll back in steps"
            )
        raws = call.get_many([p.epoch(e) for e in epochs])
        docs: list[tuple[int, dict[str, Any], Any]] = []
        for epoch, raw in zip(epochs, raws, strict=True):
            if raw is None:
                raise CorruptPayload(f"{p.epoch(epoch)}: epoch {epoch} <= newest {newest} is missing")
            docs.append((epoch, payloads.decode("epoch", raw[0], path=p.epoch(epoch)), raw[1]))
        attempts = call.get_many([p.attempt(e, int(d["attempt"])) for e, d, _ in docs])
        ops: list[Op] = [
            _request_op(ctx, call, "rollback", epochs),
            ("set", p.frontier, payloads.encode("frontier", {"epoch": to_epoch}), frontier_stat.version),
            ("set", p.base, payloads.encode("pipeline", record.body(newest_epoch=to_epoch)), record.version),
        ]
        undone: dict[str, Any] = {}
        for (epoch, doc, stat), att in zip(docs, attempts, strict=True):
            undone[str(epoch)] = {"state": doc["state"], "attempt": doc["attempt"], "generation": doc["generation"]}
            ops.append(("set", p.epoch(epoch), payloads.encode("epoch", {**payloads.body(doc), "state": "rolled_back"}),
                        stat.version))
            if att is not None:  # fences the attempt: its votes and seals are refused from now on
                att_doc = payloads.decode("attempt", att[0], path=p.attempt(epoch, int(doc["attempt"])))
                ops.append(("set", p.attempt(epoch, int(doc["attempt"])), payloads.encode("attempt", {
                    **payloads.body(att_doc), "state": "rolled_back", "changed_by": call.request_id}),
                    att[1].version))
            if doc["state"] == "sealed":
                ops.append(("delete", p.epoch_seal(epoch), -1))
        ops += _snapshot_pointer_resets(call, ctx, to_epoch, record)
        ops += ctx.event("rollback", to_epoch=to_epoch, from_frontier=current_frontier, epochs=undone,
                         reason=reason[:MAX_REASON], owner=ctx.owner)
        _commit_or_conflict(call, ops)
        ctx.known_record = None
        return epochs

    def find(call: Call) -> list[int] | None:
        stored = _stored_result(call, ctx)
        return None if stored is None else [int(e) for e in stored]

    return ctx.call(body, what=f"roll back {ctx.pipeline!r} to epoch {to_epoch}", request_id=request_id,
                    find=find)


def _snapshot_pointer_resets(call: Call, ctx: PipelineContext, to_epoch: int, record: PipelineRecord) -> list[Op]:
    """Point each partition's snapshot pointer back at its newest snapshot sealed at or before ``to_epoch``."""
    p = ctx.paths
    names = call.children(p.snapshots) or []
    ops: list[Op] = []
    for partition in names:
        path = p.snapshot_pointer(partition)
        raw = call.get(path)
        if raw is None:
            continue
        pointer = payloads.decode("snapshot_pointer", raw[0], path=path)
        current = pointer["current"]
        if int(current["epoch"]) <= to_epoch:
            continue
        previous = pointer.get("previous")
        keep: dict[str, Any] | None = previous if previous and int(previous["epoch"]) <= to_epoch else None
        if keep is None:
            for epoch in range(to_epoch, record.compacted_through, -1):
                found = epoch_record(call, ctx, epoch)
                if found is None or found[0]["state"] != "sealed":
                    continue
                generation = int(found[0]["generation"])
                if snapshots_at(call, ctx, partition, epoch, generation):
                    keep = {"epoch": epoch, "generation": generation, "attempt": int(found[0]["attempt"])}
                    break
        if keep is None:
            ops.append(("delete", path, raw[1].version))
        else:
            ops.append(("set", path, payloads.encode("snapshot_pointer", {
                "partition": partition, "current": keep, "previous": None}), raw[1].version))
    return ops
