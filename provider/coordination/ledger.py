"""The epoch ledger: epochs, attempts and fencing, unanimous seals, the frontier and snapshots.

Every state change is one ZooKeeper multi-op transaction guarded by znode versions, and carries its
own history record, so the history is exactly the sequence of committed changes. No global lock is
taken: producers of one partition serialise on that partition's tally only (Blazes' local vote), and
partitions of one epoch serialise only when they seal.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.recipe.watchers import DataWatch

from airflow_epochs.coordination import payloads
from airflow_epochs.coordination.config import ConfigVersion, PipelineConfig
from airflow_epochs.coordination.errors import (
    AttemptSuperseded,
    Backpressured,
    ConfigConflict,
    ContentionExhausted,
    CorruptPayload,
    DuplicateVote,
    EpochAlreadyOpen,
    EpochAlreadySealed,
    EpochIncomplete,
    EpochNotOpen,
    EpochOutOfOrder,
    InvalidConfig,
    InvalidEpoch,
    InvalidInput,
    PartitionAlreadySealed,
    PipelineExists,
    PipelineNotFound,
    RollbackRefused,
    UnknownPartition,
    UnknownProducer,
)
from airflow_epochs.coordination.names import MAX_EPOCH, validate_epoch, validate_name
from airflow_epochs.coordination.paths import DEFAULT_ROOT, PipelinePaths
from airflow_epochs.coordination.session import Op, Session, failed

T = TypeVar("T")

MAX_ROLLBACK_EPOCHS = 1000
_CAS_ATTEMPTS = 200
# Transaction failures that mean "someone else committed first": re-read and decide again.
_CONFLICTS = (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError)


class _Conflict(Exception):
    """Internal: a version check failed; the operation is re-run on fresh state."""


@dataclass(frozen=True)
class Attempt:
    """One try at an epoch. ``token`` is its fencing token: only the current token may vote or seal.

    An attempt is plain data (``to_dict``/``from_dict``) so it can travel between the short-lived
    processes of one epoch (Airflow tasks, a Spark driver).
    """

    pipeline: str
    epoch: int
    token: int
    owner: str
    config_version: int
    generation: int
    # Session-loss counter when this handle was obtained in this process (None: passed in from
    # elsewhere); a loss since then abandons the handle, as Curator does.
    lost_count: int | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "epoch": self.epoch,
            "token": self.token,
            "owner": self.owner,
            "config_version": self.config_version,
            "generation": self.generation,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attempt:
        try:
            return cls(
                pipeline=validate_name("pipeline", data["pipeline"]),
                epoch=validate_epoch(data["epoch"]),
                token=int(data["token"]),
                owner=validate_name("owner", data["owner"]),
                config_version=int(data["config_version"]),
                generation=int(data["generation"]),
            )
        except KeyError as exc:
            raise InvalidEpoch(f"attempt data lacks {exc.args[0]!r}: {dict(data)!r}") from None


@dataclass(frozen=True)
class EpochInfo:
    """The recorded state of one epoch."""

    epoch: int
    state: str  # "open" | "sealed" | "rolled_back"
    attempt: int
    attempt_state: str  # "running" | "aborted" | "sealed" | "rolled_back"
    owner: str
    config_version: int
    generation: int
    sealed_partitions: tuple[str, ...]
    partitions: tuple[str, ...]


@dataclass(frozen=True)
class VoteResult:
    """What a vote changed."""

    epoch: int
    partition: str
    producer: str
    attempt: int
    partition_sealed: bool
    epoch_sealed: bool
    duplicate: bool = False


@dataclass(frozen=True)
class SealInfo:
    """A sealed partition: who voted, with which manifests, and the snapshot pointers it carries."""

    epoch: int
    partition: str
    attempt: int
    generation: int
    producers: tuple[str, ...]
    manifests: Mapping[str, Any]
    snapshots: Mapping[str, Any]
    sealed_at: float
    zxid: int
    # upstream pipeline -> newest epoch of it that any producer of this partition read
    upstream: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class VoteRecord:
    """One producer's recorded vote: the attempt it was cast under, its manifest and snapshot pointer."""

    epoch: int
    partition: str
    producer: str
    attempt: int
    manifest: Any
    snapshot: Any


@dataclass(frozen=True)
class SnapshotRef:
    """The snapshot a sealed epoch left for the next one."""

    epoch: int
    partition: str
    producer: str
    pointer: Any


@dataclass(frozen=True)
class Event:
    """One recorded state change; ``zxid`` is ZooKeeper's commit order."""

    seq: int
    zxid: int
    event: str
    at: float
    detail: Mapping[str, Any]


def read_consumer_acks(
    client: KazooClient, folder: str, watch: Callable[[Any], None] | None = None
) -> dict[str, tuple[int, int]]:
    """The consumers registered under ``folder`` -> (acknowledged epoch, znode version).

    With ``watch`` (a kazoo watcher), one-shot watches are left on the folder and on each consumer,
    so the caller hears of a consumer joining, leaving or acknowledging.
    """
    names = client.get_children(folder, watch=watch) if client.exists(folder, watch=watch) else []
    out: dict[str, tuple[int, int]] = {}
    for name in names:
        path = f"{folder}/{name}"
        try:
            data, stat = client.get(path, watch=watch)
        except NoNodeError:  # left meanwhile: the folder's watch covers it
            continue
        out[name] = (int(payloads.decode("consumer", data, path=path)["acked"]), stat.version)
    return out


class EpochLedger:
    """The epoch protocol of one pipeline over a started kazoo client.

    :param client: a started :class:`~kazoo.client.KazooClient` (possibly chrooted).
    :param pipeline: the pipeline name; its subtree is ``<root>/<pipeline>``.
    :param owner: identity recorded on the attempts this ledger opens (deployment, host, run).
    :param root: the znode under which pipelines live.
    :param op_timeout: seconds to wait for ZooKeeper (reconnects included) before giving up (default 15).
    :param clock: wall clock for recorded timestamps (never used for ordering).
    """

    def __init__(
        self,
        client: KazooClient,
        pipeline: str,
        *,
        owner: str = "anonymous",
        root: str = DEFAULT_ROOT,
        op_timeout: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.paths = PipelinePaths(pipeline, root)
        self.pipeline = pipeline
        self.owner = validate_name("owner", owner)
        self.session = Session.of(client)
        self.op_timeout = op_timeout
        self.client = client
        self._clock = clock
        self._config_cache: dict[int, ConfigVersion] = {}

    # -- pipeline and configuration ----------------------------------------------------------

    def create_pipeline(
        self, config: PipelineConfig, *, first_epoch: int = 1, exist_ok: bool = True
    ) -> ConfigVersion:
        """Create the pipeline's subtree with its first configuration version.

        :param config: partitions and producers from ``first_epoch`` on.
        :param first_epoch: the first epoch number; the frontier starts just below it.
        :param exist_ok: if the pipeline exists, return its configuration for ``first_epoch``
            instead of raising :class:`PipelineExists`. An existing pipeline is never changed here;
            use :meth:`set_config`.
        """
        if not isinstance(config, PipelineConfig):
            raise InvalidConfig(f"config must be a PipelineConfig, not {type(config).__name__}")
        validate_epoch(first_epoch, what="first_epoch")
        p = self.paths

        def run() -> ConfigVersion:
            if self.session.get(p.base) is not None:
                if not exist_ok:
                    raise PipelineExists(f"pipeline {self.pipeline!r} exists already")
                return self.config_for(max(first_epoch, self._pipeline_doc()[0]["first_epoch"]))
            self.client.ensure_path(p.root)
            now = self._clock()
            ops: list[Op] = [
                ("create", p.base, payloads.encode(
                    "pipeline", {"first_epoch": first_epoch, "newest_epoch": first_epoch - 1, "created_at": now}
                ), False),
                ("create", p.config_dir, b"", False),
                ("create", f"{p.config_dir}/v-", self._encode_config(config, first_epoch), True),
                ("create", p.epochs, b"", False),
                ("create", p.frontier, payloads.encode("frontier", {"epoch": first_epoch - 1}), False),
                ("create", p.history, b"", False),
                ("create", p.locks, b"", False),
                ("create", p.leader, b"", False),
                ("create", p.consumers, b"", False),
                self._event("pipeline_created", first_epoch=first_epoch, config=config.to_json()),
            ]
            try:
                self._commit(ops)
            except _Conflict:
                if exist_ok:
                    return self.config_for(first_epoch)
                raise PipelineExists(f"pipeline {self.pipeline!r} exists already") from None
            return self.config_for(first_epoch)

        return self._call(run, what=f"create pipeline {self.pipeline!r}")

    def set_config(self, config: PipelineConfig, *, from_epoch: int) -> ConfigVersion:
        """Schedule a configuration change that applies from ``from_epoch`` on.

        ``from_epoch`` must be later than every epoch opened so far, so no epoch ever changes
        configuration while it runs.
        """
        return self.set_configs([(config, from_epoch)])[0]

    def set_configs(self, changes: Sequence[tuple[PipelineConfig, int]]) -> list[ConfigVersion]:
        """Schedule several configuration versions in one transaction (all or none), e.g. the steps of
        a fluid bucket migration. Each ``(config, from_epoch)`` follows the rule of :meth:`set_config`."""
        if not changes:
            raise InvalidConfig("no configuration changes given")
        for config, from_epoch in changes:
            if not isinstance(config, PipelineConfig):
                raise InvalidConfig(f"config must be a PipelineConfig, not {type(config).__name__}")
            validate_epoch(from_epoch, what="from_epoch")

        def once() -> list[ConfigVersion]:
            doc, stat = self._pipeline_doc()
            for _, from_epoch in changes:
                if from_epoch <= doc["newest_epoch"]:
                    raise ConfigConflict(
                        f"pipeline {self.pipeline!r}: a configuration for epoch {from_epoch} must start after "
                        f"the newest opened epoch {doc['newest_epoch']}"
                    )
                if from_epoch < doc["first_epoch"]:
                    raise ConfigConflict(
                        f"pipeline {self.pipeline!r} starts at epoch {doc['first_epoch']}; from_epoch "
                        f"{from_epoch} is before it"
                    )
            ops: list[Op] = [
                # Bumping the pipeline record's version serialises config changes with openings.
                ("set", self.paths.base, payloads.encode("pipeline", payloads.body(doc)), stat.version),
            ]
            for config, from_epoch in changes:
                ops += [
                    ("create", f"{self.paths.config_dir}/v-", self._encode_config(config, from_epoch), True),
                    self._event("config_set", from_epoch=from_epoch, config=config.to_json()),
                ]
            results = self._commit(ops)
            return [
                ConfigVersion(int(str(results[1 + 2 * i]).rsplit("-", 1)[1]), from_epoch, config)
                for i, (config, from_epoch) in enumerate(changes)
            ]

        return self._cas(once, what=f"set config of {self.pipeline!r}")

    def config_versions(self) -> list[ConfigVersion]:
        """Every configuration version, oldest first."""

        def run() -> list[ConfigVersion]:
            names = self.session.children(self.paths.config_dir)
            if names is None:
                raise PipelineNotFound(f"pipeline {self.pipeline!r} does not exist")
            versions = sorted(int(n.rsplit("-", 1)[1]) for n in names if n.startswith("v-"))
            missing = [v for v in versions if v not in self._config_cache]
            raw = self.session.get_many([f"{self.paths.config_dir}/v-{v:010d}" for v in missing])
            for version, item in zip(missing, raw, strict=True):
                if item is None:
                    continue
                path = f"{self.paths.config_dir}/v-{version:010d}"
                doc = payloads.decode("config", item[0], path=path)
                try:
                    config = PipelineConfig.from_json(doc)
                except InvalidConfig as exc:
                    raise CorruptPayload(f"{path}: {exc}") from exc
                self._config_cache[version] = ConfigVersion(version, doc["from_epoch"], config)
            return [self._config_cache[v] for v in versions if v in self._config_cache]

        return self._call(run, what="read config versions")

    def config_for(self, epoch: int) -> ConfigVersion:
        """The configuration version in force at ``epoch``: the newest one starting at or before it."""
        validate_epoch(epoch)
        best: ConfigVersion | None = None
        for cv in self.config_versions():
            newer = best is None or (cv.from_epoch, cv.version) > (best.from_epoch, best.version)
            if cv.from_epoch <= epoch and newer:
                best = cv
        if best is None:
            raise UnknownPartition(f"pipeline {self.pipeline!r} has no configuration for epoch {epoch}")
        return best

    def _config_version(self, version: int) -> ConfigVersion:
        if version not in self._config_cache:
            self.config_versions()
        try:
            return self._config_cache[version]
        except KeyError:
            raise CorruptPayload(f"pipeline {self.pipeline!r}: config version {version} is missing") from None

    # -- epochs and attempts -----------------------------------------------------------------

    def open_epoch(self, epoch: int, *, takeover: bool = False, wait: float | None = None) -> Attempt:
        """Open ``epoch`` (or resume or take over its attempt) and return the attempt to work under.

        - a new epoch opens only if ``epoch - 1`` is sealed (or it is the first epoch);
        - an epoch whose running attempt belongs to this ledger's owner is resumed (same token);
        - an epoch with another owner's running attempt raises :class:`EpochAlreadyOpen`, unless
          ``takeover`` is set: then a new attempt supersedes it (the old token is fenced off);
        - an epoch whose attempt was aborted gets a new attempt;
        - a rolled-back epoch is reopened as a new generation under the configuration in force;
        - with a backpressure window in the configuration, a new epoch e opens only while
          e <= slowest consumer's acknowledged epoch + window: otherwise :class:`Backpressured` is
          raised at once, or after waiting up to ``wait`` seconds for the consumers to catch up.
        """
        validate_epoch(epoch)
        if wait is not None and (isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait < 0):
            raise InvalidInput(f"wait must be a non-negative number of seconds or None, not {wait!r}")
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            changed = threading.Event()
            try:
                return self._open_epoch(epoch, takeover=takeover, on_consumer_change=changed.set)
            except Backpressured:
                if deadline is None or time.monotonic() >= deadline:
                    raise
                changed.wait(max(0.0, deadline - time.monotonic()))

    def _open_epoch(self, epoch: int, *, takeover: bool, on_consumer_change: Callable[[], None]) -> Attempt:
        p = self.paths

        def once() -> Attempt:
            pipe, pipe_stat = self._pipeline_doc()
            node = self.session.get(p.epoch(epoch))
            frontier, frontier_stat = self._frontier_doc()
            now = self._clock()
            if node is not None:
                doc = payloads.decode("epoch", node[0], path=p.epoch(epoch))
                stat = node[1]
                if doc["state"] == "sealed":
                    raise EpochAlreadySealed(
                        f"pipeline {self.pipeline!r}: epoch {epoch} is sealed (attempt {doc['attempt']} by "
                        f"{doc['owner']!r}); only a recorded rollback can reopen it"
                    )
                if doc["state"] == "open":
                    if doc["attempt_state"] == "running":
                        if doc["owner"] == self.owner:
                            return self._attempt(epoch, doc)
                        if not takeover:
                            raise EpochAlreadyOpen(
                                f"pipeline {self.pipeline!r}: epoch {epoch} is open under attempt "
                                f"{doc['attempt']} of {doc['owner']!r}",
                                owner=doc["owner"],
                                attempt=doc["attempt"],
                            )
                    token = doc["attempt"] + 1
                    new = {**payloads.body(doc), "attempt": token, "attempt_state": "running", "owner": self.owner}
                    self._commit([
                        ("set", p.epoch(epoch), payloads.encode("epoch", new), stat.version),
                        ("create", p.attempt(epoch, token), self._encode_attempt(token, now), False),
                        self._event("attempt_started", epoch=epoch, attempt=token, owner=self.owner,
                                    superseded=doc["attempt"], previous_state=doc["attempt_state"]),
                    ])
                    return self._attempt(epoch, new)
            if epoch != frontier + 1:
                still_open = f" (epoch {frontier + 1} is open and must be sealed first)" \
                    if pipe["newest_epoch"] > frontier else ""
                raise EpochOutOfOrder(
                    f"pipeline {self.pipeline!r}: cannot open epoch {epoch}: the frontier is {frontier}, "
                    f"so the next epoch to open is {frontier + 1}{still_open}"
                )
            cv = self.config_for(epoch)
            consumer_checks = self._backpressure_checks(epoch, cv.config.window, on_consumer_change)
            generation = 1
            token = 1
            if node is not None:  # rolled back: a new generation, tokens keep increasing
                old = payloads.decode("epoch", node[0], path=p.epoch(epoch))
                generation = old["generation"] + 1
                token = old["attempt"] + 1
            doc = {
                "state": "open",
                "attempt": token,
                "attempt_state": "running",
                "owner": self.owner,
                "config_version": cv.version,
                "generation": generation,
                "opened_at": now,
            }
            ops: list[Op] = [
                ("set", p.base, payloads.encode("pipeline", {**payloads.body(pipe), "newest_epoch": epoch}),
                 pipe_stat.version),
                ("check", p.frontier, frontier_stat.version),
                *consumer_checks,
            ]
            if node is None:
                ops += [
                    ("create", p.epoch(epoch), payloads.encode("epoch", doc), False),
                    ("create", p.attempts(epoch), b"", False),
                ]
            else:
                ops.append(("set", p.epoch(epoch), payloads.encode("epoch", doc), node[1].version))
            ops += [
                ("create", p.attempt(epoch, token), self._encode_attempt(token, now), False),
                ("create", p.generation(epoch, generation), b"", False),
                ("create", p.progress(epoch, generation), payloads.encode("progress", {"sealed": []}), False),
                ("create", p.partitions(epoch, generation), b"", False),
            ]
            for partition in cv.config.partitions:
                ops += [
                    ("create", p.partition(epoch, generation, partition),
                     payloads.encode("tally", {"votes": {}}), False),
                    ("create", p.votes(epoch, generation, partition), b"", False),
                ]
            ops.append(self._event("epoch_opened", epoch=epoch, attempt=token, owner=self.owner,
                                   config_version=cv.version, generation=generation))
            self._commit(ops)
            return self._attempt(epoch, doc)

        return self._cas(once, what=f"open epoch {epoch} of {self.pipeline!r}")

    def _consumer_acks(self, watch: Callable[[], None] | None = None) -> dict[str, tuple[int, int]]:
        """Registered consumers -> (acknowledged epoch, znode version); optionally watched."""
        return read_consumer_acks(self.client, self.paths.consumers,
                                  (lambda _event: watch()) if watch is not None else None)

    def _backpressure_checks(self, epoch: int, window: int | None, watch: Callable[[], None]) -> list[Op]:
        """Refuse to open ``epoch`` too far ahead of the slowest consumer; else the version checks
        that make the opening fail if a consumer's acknowledgement changes meanwhile."""
        if window is None:
            return []
        acks = self._consumer_acks(watch)
        if not acks:
            return []
        slowest = min(acks, key=lambda name: acks[name][0])
        acked = acks[slowest][0]
        if epoch > acked + window:
            raise Backpressured(
                f"pipeline {self.pipeline!r}: epoch {epoch} waits for consumer {slowest!r}, which acknowledged "
                f"epoch {acked}; the window is {window}, so epochs up to {acked + window} may open",
                consumer=slowest, acked=acked, window=window,
            )
        return [("check", f"{self.paths.consumers}/{name}", version) for name, (_, version) in acks.items()]

    def current_attempt(self, epoch: int) -> Attempt:
        """The epoch's current attempt (to resume it from another process); raises if not open."""
        doc = self._epoch_doc(epoch)
        if doc["state"] != "open":
            raise EpochNotOpen(f"pipeline {self.pipeline!r}: epoch {epoch} is {doc['state']}, not open")
        return self._attempt(epoch, doc)

    def abort_attempt(self, attempt: Attempt, *, reason: str = "") -> None:
        """Abort the current attempt: its token can no longer vote; the epoch stays open for a new one."""
        self._check_handle(attempt)
        p = self.paths

        def once() -> None:
            doc, stat = self._epoch_doc_stat(attempt.epoch)
            self._check_current(attempt, doc)
            new = {**payloads.body(doc), "attempt_state": "aborted"}
            self._commit([
                ("set", p.epoch(attempt.epoch), payloads.encode("epoch", new), stat.version),
                self._event("attempt_aborted", epoch=attempt.epoch, attempt=attempt.token,
                            owner=attempt.owner, reason=str(reason)[:500]),
            ])

        self._cas(once, what=f"abort attempt {attempt.token} of epoch {attempt.epoch}")

    # -- votes and seals ---------------------------------------------------------------------

    def vote(
        self,
        attempt: Attempt,
        partition: str,
        producer: str,
        manifest: Mapping[str, Any] | None = None,
        *,
        snapshot: Any = None,
        upstream: Mapping[str, int] | None = None,
    ) -> VoteResult:
        """Record that ``producer`` finished its part of ``partition`` under ``attempt``.

        When this is the last vote the partition needs, the same transaction writes the seal, and
        when it is the last partition the epoch needs, it also seals the epoch and advances the
        frontier. A repeated identical vote is a no-op (``duplicate=True``); a vote with another
        manifest, from a superseded attempt, or for an unknown partition or producer is refused and
        writes nothing.

        :param manifest: what the producer wrote: paths, row counts, checksums (small JSON).
        :param snapshot: optional pointer to the state snapshot this epoch leaves for the next one.
        :param upstream: the upstream frontiers this output was built from (causal lineage), e.g.
            ``{"flights_raw": 17, "weather_raw": 42}``.
        """
        self._check_handle(attempt)
        validate_name("partition", partition)
        validate_name("producer", producer)
        body = payloads.check_manifest({} if manifest is None else manifest)
        snap = payloads.check_manifest({"snapshot": snapshot}, what="snapshot")["snapshot"]
        lineage = _check_upstream(upstream)
        p = self.paths

        def once() -> VoteResult:
            # One round trip for everything a vote may need; every decision taken on these reads is
            # guarded by a version check in the transaction below. The attempt's own generation is
            # the only one it may vote in, so its paths can be read before the epoch record.
            epoch_raw, tally_raw, prog_raw, frontier_raw = self.session.get_many([
                p.epoch(attempt.epoch), p.partition(attempt.epoch, attempt.generation, partition),
                p.progress(attempt.epoch, attempt.generation), p.frontier,
            ])
            if epoch_raw is None:
                doc, estat = self._epoch_doc_stat(attempt.epoch)  # raises the specific error
            else:
                doc, estat = payloads.decode("epoch", epoch_raw[0], path=p.epoch(attempt.epoch)), epoch_raw[1]
            gen = doc["generation"]
            version = self._config_version(doc["config_version"])
            config = version.config
            producers = producers_of(version, self.pipeline, attempt.epoch, partition, producer)
            if doc["state"] == "sealed" and doc["attempt"] == attempt.token and gen == attempt.generation:
                return self._repeat_vote(attempt, partition, producer, body, snap, lineage)
            self._check_current(attempt, doc)
            tally_path = p.partition(attempt.epoch, gen, partition)
            if tally_raw is None:
                raise CorruptPayload(f"{tally_path}: missing partition tally")
            tally = payloads.decode("tally", tally_raw[0], path=tally_path)
            votes: dict[str, int] = dict(tally["votes"])
            if "sealed_by" in tally:
                return self._repeat_vote(attempt, partition, producer, body, snap, lineage)
            if votes.get(producer) == attempt.token:
                return self._repeat_vote(attempt, partition, producer, body, snap, lineage)
            now = self._clock()
            vote_path = p.vote(attempt.epoch, gen, partition, producer)
            ops: list[Op] = [("check", p.epoch(attempt.epoch), estat.version)]
            if producer in votes:  # a vote of a superseded attempt: replaced, never counted
                ops.append(("delete", vote_path, -1))
            votes[producer] = attempt.token
            complete = all(votes.get(name) == attempt.token for name in producers)
            new_tally: dict[str, Any] = {"votes": votes}
            if complete:
                new_tally["sealed_by"] = attempt.token
            ops += [
                ("set", tally_path, payloads.encode("tally", new_tally), tally_raw[1].version),
                ("create", vote_path, payloads.encode("vote", {
                    "producer": producer, "attempt": attempt.token, "manifest": body,
                    "snapshot": snap, "upstream": lineage, "voted_at": now,
                }), False),
                self._event("vote", epoch=attempt.epoch, partition=partition, producer=producer,
                            attempt=attempt.token),
            ]
            epoch_sealed = False
            if complete:
                progress_path = p.progress(attempt.epoch, gen)
                if prog_raw is None:
                    raise CorruptPayload(f"{progress_path}: missing epoch progress")
                sealed = list(payloads.decode("progress", prog_raw[0], path=progress_path)["sealed"])
                sealed.append(partition)
                ops += [
                    ("create", p.seal(attempt.epoch, gen, partition), payloads.encode("seal", {
                        "partition": partition, "attempt": attempt.token, "producers": list(producers),
                        "sealed_at": now, "generation": gen,
                    }), False),
                    ("set", progress_path, payloads.encode("progress", {"sealed": sorted(sealed)}),
                     prog_raw[1].version),
                    self._event("partition_sealed", epoch=attempt.epoch, partition=partition,
                                attempt=attempt.token, producers=list(producers)),
                ]
                if set(config.partitions) <= set(sealed):
                    if frontier_raw is None:
                        raise CorruptPayload(f"{p.frontier}: missing frontier")
                    frontier_now = int(payloads.decode("frontier", frontier_raw[0], path=p.frontier)["epoch"])
                    ops += self._seal_epoch_ops(attempt, doc, estat.version, (frontier_now, frontier_raw[1]))
                    epoch_sealed = True
            self._commit(ops)
            return VoteResult(attempt.epoch, partition, producer, attempt.token, complete, epoch_sealed)

        return self._cas(once, what=f"vote {producer!r} on {partition!r} at epoch {attempt.epoch}")

    def close_epoch(self, attempt: Attempt) -> EpochInfo:
        """Seal the epoch once every partition is sealed, advancing the frontier; idempotent.

        The last vote normally seals the epoch already; this call verifies it, and seals epochs
        whose configuration has no partitions. Raises :class:`EpochIncomplete` naming the partitions
        still unsealed.
        """
        self._check_handle(attempt)

        def once() -> EpochInfo:
            doc, stat = self._epoch_doc_stat(attempt.epoch)
            if doc["state"] == "sealed":
                if doc["attempt"] != attempt.token or doc["generation"] != attempt.generation:
                    raise EpochAlreadySealed(
                        f"pipeline {self.pipeline!r}: epoch {attempt.epoch} was sealed by attempt "
                        f"{doc['attempt']} of {doc['owner']!r}, not by attempt {attempt.token}"
                    )
                return self._info(attempt.epoch, doc)
            self._check_current(attempt, doc)
            info = self._info(attempt.epoch, doc)
            missing = sorted(set(info.partitions) - set(info.sealed_partitions))
            if missing:
                raise EpochIncomplete(
                    f"pipeline {self.pipeline!r}: epoch {attempt.epoch} cannot be closed; partitions not "
                    f"sealed yet: {missing}",
                    missing=missing,
                )
            self._commit(self._seal_epoch_ops(attempt, doc, stat.version))
            return self._info(attempt.epoch, self._epoch_doc(attempt.epoch))

        return self._cas(once, what=f"close epoch {attempt.epoch} of {self.pipeline!r}")

    def _seal_epoch_ops(
        self, attempt: Attempt, doc: Mapping[str, Any], version: int, frontier_read: tuple[int, Any] | None = None
    ) -> list[Op]:
        frontier, frontier_stat = frontier_read if frontier_read is not None else self._frontier_doc()
        if frontier >= attempt.epoch:
            raise _Conflict()  # sealed by a concurrent writer after our reads: decide again on fresh state
        if frontier != attempt.epoch - 1:
            raise EpochOutOfOrder(
                f"pipeline {self.pipeline!r}: epoch {attempt.epoch} cannot be sealed while the frontier is "
                f"{frontier}"
            )
        new = {**payloads.body(doc), "state": "sealed", "attempt_state": "sealed", "sealed_at": self._clock()}
        return [
            ("set", self.paths.epoch(attempt.epoch), payloads.encode("epoch", new), version),
            ("set", self.paths.frontier, payloads.encode("frontier", {"epoch": attempt.epoch}), frontier_stat.version),
            self._event("epoch_sealed", epoch=attempt.epoch, attempt=attempt.token, owner=attempt.owner,
                        frontier=attempt.epoch),
        ]

    def _repeat_vote(
        self, attempt: Attempt, partition: str, producer: str, body: Any, snap: Any, lineage: dict[str, int]
    ) -> VoteResult:
        """A vote that may already be recorded: a no-op if identical, otherwise a specific refusal."""
        doc = self._epoch_doc(attempt.epoch)
        gen = doc["generation"]
        vote_path = self.paths.vote(attempt.epoch, gen, partition, producer)
        raw = self.session.get(vote_path)
        seal_raw = self.session.get(self.paths.seal(attempt.epoch, gen, partition))
        seal_token = payloads.decode("seal", seal_raw[0])["attempt"] if seal_raw else None
        if raw is not None:
            existing = payloads.decode("vote", raw[0], path=vote_path)
            same = existing["manifest"] == body and existing.get("snapshot") == snap \
                and (existing.get("upstream") or {}) == lineage
            if existing["attempt"] == attempt.token and same:
                return VoteResult(
                    attempt.epoch, partition, producer, attempt.token,
                    partition_sealed=seal_raw is not None, epoch_sealed=doc["state"] == "sealed", duplicate=True,
                )
            if existing["attempt"] == attempt.token:
                raise DuplicateVote(
                    f"pipeline {self.pipeline!r}: producer {producer!r} already voted on partition {partition!r} "
                    f"at epoch {attempt.epoch} (attempt {attempt.token}) with a different manifest"
                )
        if seal_token is not None:
            raise PartitionAlreadySealed(
                f"pipeline {self.pipeline!r}: partition {partition!r} of epoch {attempt.epoch} is sealed by "
                f"attempt {seal_token}; the vote of {producer!r} (attempt {attempt.token}) is refused"
            )
        raise CorruptPayload(f"{vote_path}: the partition tally records a vote that is not there")

    # -- rollback ----------------------------------------------------------------------------

    def rollback(self, to_epoch: int, *, reason: str) -> list[int]:
        """Roll back every epoch after ``to_epoch`` (sealed or open) and move the frontier to it.

        Rolled-back epochs keep their seals as the record of what was undone (an old generation);
        reopening one starts a new generation. Returns the rolled-back epoch numbers.

        :param to_epoch: the last epoch that stays sealed (``first_epoch - 1`` rolls back everything).
        :param reason: why, recorded in the history.
        """
        if isinstance(to_epoch, bool) or not isinstance(to_epoch, int) or not 0 <= to_epoch <= MAX_EPOCH:
            raise InvalidEpoch(f"to_epoch must be an integer in 0..{MAX_EPOCH}, not {to_epoch!r}")
        if not isinstance(reason, str) or not reason.strip():
            raise RollbackRefused("a rollback needs a reason; it is recorded in the history")
        p = self.paths

        def once() -> list[int]:
            pipe, pipe_stat = self._pipeline_doc()
            frontier, frontier_stat = self._frontier_doc()
            newest = pipe["newest_epoch"]
            if to_epoch < pipe["first_epoch"] - 1:
                raise RollbackRefused(
                    f"pipeline {self.pipeline!r} starts at epoch {pipe['first_epoch']}; cannot roll back to {to_epoch}"
                )
            if to_epoch > frontier:
                raise RollbackRefused(
                    f"pipeline {self.pipeline!r}: can only roll back to a sealed epoch; {to_epoch} is after the "
                    f"frontier {frontier}"
                )
            if to_epoch >= newest:
                raise RollbackRefused(
                    f"pipeline {self.pipeline!r}: nothing after epoch {to_epoch} to roll back (newest epoch {newest})"
                )
            epochs = list(range(to_epoch + 1, newest + 1))
            if len(epochs) > MAX_ROLLBACK_EPOCHS:
                raise RollbackRefused(
                    f"rolling back {len(epochs)} epochs at once exceeds {MAX_ROLLBACK_EPOCHS}; roll back in steps"
                )
            ops: list[Op] = []
            undone: dict[str, Any] = {}
            for epoch, raw in zip(epochs, self.session.get_many([p.epoch(e) for e in epochs]), strict=True):
                if raw is None:
                    raise CorruptPayload(f"{p.epoch(epoch)}: epoch {epoch} <= newest {newest} is missing")
                doc = payloads.decode("epoch", raw[0], path=p.epoch(epoch))
                undone[str(epoch)] = {"state": doc["state"], "attempt": doc["attempt"], "generation": doc["generation"]}
                new = {**payloads.body(doc), "state": "rolled_back", "attempt_state": "rolled_back"}
                ops.append(("set", p.epoch(epoch), payloads.encode("epoch", new), raw[1].version))
            ops += [
                ("set", p.frontier, payloads.encode("frontier", {"epoch": to_epoch}), frontier_stat.version),
                ("set", p.base, payloads.encode("pipeline", {**payloads.body(pipe), "newest_epoch": to_epoch}),
                 pipe_stat.version),
                self._event("rollback", to_epoch=to_epoch, from_frontier=frontier, epochs=undone,
                            reason=reason[:500], owner=self.owner),
            ]
            self._commit(ops)
            return epochs

        return self._cas(once, what=f"roll back {self.pipeline!r} to epoch {to_epoch}")

    # -- reading -----------------------------------------------------------------------------

    def frontier(self) -> int:
        """The highest epoch such that it and every earlier epoch are sealed."""
        return self._call(lambda: self._frontier_doc()[0], what="read frontier")

    def watch_frontier(self, callback: Callable[[int], Any]) -> DataWatch:
        """Call ``callback(frontier)`` now and after every change (kazoo DataWatch; survives reconnects).

        The callback runs on kazoo's event thread; return ``False`` from it to stop watching.
        """
        path = self.paths.frontier

        def on_change(data: bytes | None, _stat: Any) -> Any:
            if data is None:
                return None
            return callback(payloads.decode("frontier", data, path=path)["epoch"])

        return DataWatch(self.client, path, on_change)

    def epoch_info(self, epoch: int) -> EpochInfo | None:
        """The recorded state of ``epoch``, or None if it was never opened."""
        validate_epoch(epoch)

        def run() -> EpochInfo | None:
            raw = self.session.get(self.paths.epoch(epoch))
            if raw is None:
                return None
            return self._info(epoch, payloads.decode("epoch", raw[0], path=self.paths.epoch(epoch)))

        return self._call(run, what=f"read epoch {epoch}")

    def newest_epoch(self) -> int:
        """The newest epoch opened (and not rolled back); ``first_epoch - 1`` if none."""
        return int(self._call(lambda: self._pipeline_doc()[0]["newest_epoch"], what="read pipeline"))

    def seal(self, epoch: int, partition: str) -> SealInfo | None:
        """The seal of ``partition`` at ``epoch`` (current generation) with its votes, or None."""
        validate_epoch(epoch)
        validate_name("partition", partition)

        def run() -> SealInfo | None:
            raw = self.session.get(self.paths.epoch(epoch))
            if raw is None:
                return None
            doc = payloads.decode("epoch", raw[0], path=self.paths.epoch(epoch))
            if doc["state"] == "rolled_back":
                return None
            return self._read_seal(epoch, doc["generation"], partition)

        return self._call(run, what=f"read seal {partition!r} of epoch {epoch}")

    def vote_of(self, epoch: int, partition: str, producer: str) -> VoteRecord | None:
        """The vote ``producer`` cast on ``partition`` in the epoch's current generation, or None."""
        validate_epoch(epoch)
        validate_name("partition", partition)
        validate_name("producer", producer)

        def run() -> VoteRecord | None:
            raw = self.session.get(self.paths.epoch(epoch))
            if raw is None:
                return None
            doc = payloads.decode("epoch", raw[0], path=self.paths.epoch(epoch))
            path = self.paths.vote(epoch, doc["generation"], partition, producer)
            vote_raw = self.session.get(path)
            if vote_raw is None:
                return None
            vote = payloads.decode("vote", vote_raw[0], path=path)
            return VoteRecord(epoch, partition, producer, int(vote["attempt"]), vote["manifest"], vote.get("snapshot"))

        return self._call(run, what=f"read the vote of {producer!r} on {partition!r} at epoch {epoch}")

    def _read_seal(self, epoch: int, generation: int, partition: str) -> SealInfo | None:
        p = self.paths
        seal_path = p.seal(epoch, generation, partition)
        raw = self.session.get(seal_path)
        if raw is None:
            return None
        doc = payloads.decode("seal", raw[0], path=seal_path)
        producers = tuple(doc["producers"])
        votes = self.session.get_many([p.vote(epoch, generation, partition, name) for name in producers])
        manifests: dict[str, Any] = {}
        snapshots: dict[str, Any] = {}
        upstream: dict[str, int] = {}
        for name, vote_raw in zip(producers, votes, strict=True):
            if vote_raw is None:
                raise CorruptPayload(f"{seal_path}: the vote of {name!r} is missing")
            vote = payloads.decode("vote", vote_raw[0], path=p.vote(epoch, generation, partition, name))
            manifests[name] = vote["manifest"]
            if vote.get("snapshot") is not None:
                snapshots[name] = vote["snapshot"]
            for upstream_pipeline, upstream_epoch in (vote.get("upstream") or {}).items():
                upstream[upstream_pipeline] = max(upstream.get(upstream_pipeline, 0), int(upstream_epoch))
        return SealInfo(
            epoch=epoch, partition=partition, attempt=doc["attempt"], generation=generation,
            producers=producers, manifests=manifests, snapshots=snapshots,
            sealed_at=float(doc["sealed_at"]), zxid=int(raw[1].czxid), upstream=upstream,
        )

    def last_sealed_snapshot(
        self, partition: str, *, before_epoch: int | None = None, producer: str | None = None
    ) -> SnapshotRef | None:
        """The newest snapshot pointer sealed for ``partition`` before ``before_epoch``.

        A retry of epoch e asks with ``before_epoch=e`` and gets what epoch e-1 (or the newest earlier
        epoch that left one) sealed; output of unsealed attempts is never returned.

        :param producer: which producer's snapshot, if several producers of the partition left one.
        """
        validate_name("partition", partition)
        if producer is not None:
            validate_name("producer", producer)
        if before_epoch is not None:
            validate_epoch(before_epoch, what="before_epoch")

        def run() -> SnapshotRef | None:
            frontier = self._frontier_doc()[0]
            first = self._pipeline_doc()[0]["first_epoch"]
            start = frontier if before_epoch is None else min(frontier, before_epoch - 1)
            for epoch in range(start, first - 1, -1):
                raw = self.session.get(self.paths.epoch(epoch))
                if raw is None:
                    continue
                doc = payloads.decode("epoch", raw[0], path=self.paths.epoch(epoch))
                seal = self._read_seal(epoch, doc["generation"], partition)
                if seal is None or not seal.snapshots:
                    continue
                if producer is None and len(seal.snapshots) > 1:
                    raise UnknownProducer(
                        f"partition {partition!r} at epoch {epoch} has snapshots from {sorted(seal.snapshots)}; "
                        "name the producer"
                    )
                name = producer or next(iter(seal.snapshots))
                if name in seal.snapshots:
                    return SnapshotRef(epoch, partition, name, seal.snapshots[name])
            return None

        return self._call(run, what=f"find last snapshot of {partition!r}")

    def history(self, *, since_seq: int = -1) -> list[Event]:
        """Every recorded state change after ``since_seq``, in commit order."""

        def run() -> list[Event]:
            names = self.session.children(self.paths.history)
            if names is None:
                raise PipelineNotFound(f"pipeline {self.pipeline!r} does not exist")
            seqs = sorted(int(n.rsplit("-", 1)[1]) for n in names if n.startswith("h-"))
            seqs = [s for s in seqs if s > since_seq]
            raws = self.session.get_many([f"{self.paths.history}/h-{s:010d}" for s in seqs])
            events: list[Event] = []
            for seq, raw in zip(seqs, raws, strict=True):
                if raw is None:
                    continue
                doc = payloads.decode("event", raw[0], path=f"{self.paths.history}/h-{seq:010d}")
                events.append(Event(seq, int(raw[1].czxid), doc["event"], float(doc["at"]), doc["detail"]))
            events.sort(key=lambda ev: ev.zxid)
            return events

        return self._call(run, what="read history")

    def record(self, event: str, **detail: Any) -> None:
        """Append an event to the history outside any transaction (e.g. a leadership change)."""
        op = self._event(event, **detail)
        self._call(lambda: self.session.client.create(op[1], op[2], sequence=True), what="record event")

    # -- internals ---------------------------------------------------------------------------

    def _call(self, fn: Callable[[], T], *, what: str) -> T:
        return self.session.call(fn, what=what, timeout=self.op_timeout)

    def _cas(self, once: Callable[[], T], *, what: str) -> T:
        def loop() -> T:
            for attempt in range(_CAS_ATTEMPTS):
                try:
                    return once()
                except _Conflict:
                    time.sleep(random.uniform(0, min(0.002 * (attempt + 1), 0.05)))  # noqa: S311 - jitter
            raise ContentionExhausted(f"{what}: lost {_CAS_ATTEMPTS} compare-and-set rounds to other writers")

        return self._call(loop, what=what)

    def _commit(self, ops: Sequence[Op]) -> list[Any]:
        results = self.session.commit(ops)
        error = failed(results)
        if error is None:
            return results
        if isinstance(error, _CONFLICTS):
            raise _Conflict()
        raise error

    def _event(self, event: str, **detail: Any) -> Op:
        return ("create", f"{self.paths.history}/h-",
                payloads.encode("event", {"event": event, "at": self._clock(), "detail": detail}), True)

    def _encode_config(self, config: PipelineConfig, from_epoch: int) -> bytes:
        return payloads.encode("config", {"from_epoch": from_epoch, **config.to_json()})

    def _encode_attempt(self, token: int, now: float) -> bytes:
        return payloads.encode("attempt", {"token": token, "owner": self.owner, "started_at": now})

    def _attempt(self, epoch: int, doc: Mapping[str, Any]) -> Attempt:
        return Attempt(
            pipeline=self.pipeline, epoch=epoch, token=doc["attempt"], owner=doc["owner"],
            config_version=doc["config_version"], generation=doc["generation"],
            lost_count=self.session.lost_count,
        )

    def _check_handle(self, attempt: Attempt) -> None:
        if not isinstance(attempt, Attempt):
            raise InvalidEpoch(f"expected an Attempt, got {type(attempt).__name__}")
        if attempt.pipeline != self.pipeline:
            raise InvalidEpoch(f"attempt belongs to pipeline {attempt.pipeline!r}, not {self.pipeline!r}")
        if attempt.lost_count is not None:
            self.session.ensure_not_lost_since(attempt.lost_count, f"attempt {attempt.token} of epoch {attempt.epoch}")

    def _check_current(self, attempt: Attempt, doc: Mapping[str, Any]) -> None:
        if doc["state"] == "sealed":
            raise EpochAlreadySealed(
                f"pipeline {self.pipeline!r}: epoch {attempt.epoch} is sealed by attempt {doc['attempt']}"
            )
        if doc["attempt"] != attempt.token or doc["generation"] != attempt.generation or doc["state"] != "open" \
                or doc["attempt_state"] != "running":
            raise AttemptSuperseded(
                f"pipeline {self.pipeline!r}: attempt {attempt.token} of epoch {attempt.epoch} is no longer "
                f"current (epoch {doc['state']}, attempt {doc['attempt']} {doc['attempt_state']} by "
                f"{doc['owner']!r}); nothing was written",
                attempt=attempt.token,
                current=doc["attempt"],
            )

    def _pipeline_doc(self) -> tuple[dict[str, Any], Any]:
        raw = self.session.get(self.paths.base)
        if raw is None:
            raise PipelineNotFound(f"pipeline {self.pipeline!r} does not exist under {self.paths.root}")
        return payloads.decode("pipeline", raw[0], path=self.paths.base), raw[1]

    def _frontier_doc(self) -> tuple[int, Any]:
        raw = self.session.get(self.paths.frontier)
        if raw is None:
            raise PipelineNotFound(f"pipeline {self.pipeline!r} does not exist under {self.paths.root}")
        return int(payloads.decode("frontier", raw[0], path=self.paths.frontier)["epoch"]), raw[1]

    def _epoch_doc_stat(self, epoch: int) -> tuple[dict[str, Any], Any]:
        raw = self.session.get(self.paths.epoch(epoch))
        if raw is None:
            if self.session.get(self.paths.base) is None:
                raise PipelineNotFound(f"pipeline {self.pipeline!r} does not exist under {self.paths.root}")
            raise EpochNotOpen(f"pipeline {self.pipeline!r}: epoch {epoch} has not been opened")
        return payloads.decode("epoch", raw[0], path=self.paths.epoch(epoch)), raw[1]

    def _epoch_doc(self, epoch: int) -> dict[str, Any]:
        return self._epoch_doc_stat(epoch)[0]

    def _info(self, epoch: int, doc: Mapping[str, Any]) -> EpochInfo:
        config = self._config_version(doc["config_version"]).config
        sealed: list[str] = []
        if doc["state"] != "rolled_back":
            path = self.paths.progress(epoch, doc["generation"])
            raw = self.session.get(path)
            if raw is not None:
                sealed = list(payloads.decode("progress", raw[0], path=path)["sealed"])
        return EpochInfo(
            epoch=epoch, state=doc["state"], attempt=doc["attempt"], attempt_state=doc["attempt_state"],
            owner=doc["owner"], config_version=doc["config_version"], generation=doc["generation"],
            sealed_partitions=tuple(sorted(sealed)), partitions=tuple(sorted(config.partitions)),
        )


def producers_of(version: ConfigVersion, pipeline: str, epoch: int, partition: str, producer: str) -> tuple[str, ...]:
    """The producers registered for ``partition`` under ``version``; refuses an unknown partition or producer."""
    config = version.config
    if partition not in config.partitions:
        raise UnknownPartition(
            f"pipeline {pipeline!r}: partition {partition!r} is not in the configuration of epoch "
            f"{epoch} (version {version.version}: {sorted(config.partitions)})"
        )
    producers = config.partitions[partition]
    if producer not in producers:
        raise UnknownProducer(
            f"pipeline {pipeline!r}: producer {producer!r} is not registered for partition "
            f"{partition!r} at epoch {epoch} (registered: {list(producers)})"
        )
    return tuple(producers)


def _check_upstream(upstream: Mapping[str, int] | None) -> dict[str, int]:
    if upstream is None:
        return {}
    if not isinstance(upstream, Mapping):
        raise InvalidInput(f"upstream must map pipeline names to epochs, not {type(upstream).__name__}")
    out: dict[str, int] = {}
    for name, epoch in upstream.items():
        validate_name("pipeline", name)
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise InvalidInput(f"upstream epoch of {name!r} must be a non-negative integer, not {epoch!r}")
        out[name] = epoch
    return out
