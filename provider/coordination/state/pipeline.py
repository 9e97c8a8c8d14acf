"""What every part of the core needs for one pipeline: its paths, the session, the owner identity,
the clock, the pipeline record and the configuration store.

The pipeline record (``<root>/<pipeline>``) holds the first and newest opened epoch, the index of
configuration versions (version -> first epoch) and how far old epochs are compacted. Every
configuration change, opening and rollback bumps its version, which serialises them. Configuration
bodies are immutable once written, so each is read once per client and cached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.client import KazooClient

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.errors import CorruptPayload, PipelineNotFound, TooManyRequests, UnknownPartition
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.coordination.base.paths import PipelinePaths
from airflow_epochs.coordination.base.session import Session, validate_request_id
from airflow_epochs.coordination.base.steps import Create, SetData, Step
from airflow_epochs.coordination.state.history import event_ops
from airflow_epochs.coordination.wire.config import ConfigVersion
from airflow_epochs.coordination.wire.events import EventRecord
from airflow_epochs.coordination.wire.nodes import PipelineRecord, RequestNode, decode_config

T = TypeVar("T")

# Pipeline-level request ids (rollbacks, configuration changes, consumers coming and going) one
# pipeline remembers at once, until retention forgets the old ones: the ``requests`` listing that
# retention reads stays under 4096 x 132 bytes (docs: Bounded answers).
MAX_REMEMBERED_REQUESTS = 4096


class PipelineContext:
    """One pipeline as seen by one client and one owner identity, built by
    :class:`~airflow_epochs.coordination.EpochLedger` (whose constructor declares the defaults and says
    what each setting means) and by :meth:`as_owner`.

    :param client: a started kazoo client (possibly chrooted).
    :param paths: the pipeline's layout (its name and root).
    :param owner: identity recorded on what this context writes.
    :param op_timeout: the deadline of one call in seconds (None: the session's).
    :param clock: wall clock for recorded timestamps.
    """

    def __init__(self, client: KazooClient, paths: PipelinePaths, *, owner: str, op_timeout: float | None,
                 clock: Callable[[], float]) -> None:
        self.paths = paths
        self.pipeline = paths.pipeline
        self.owner = validate_name("owner", owner)
        self.client = client
        self.session = Session.of(client)
        self.op_timeout = op_timeout
        self.clock = clock
        # The pipeline record as this context last wrote it (version included): the next opening
        # can be tried on it without reading it first; a version check catches any change since.
        self.known_record: PipelineRecord | None = None

    def as_owner(self, owner: str) -> PipelineContext:
        """This pipeline on the same client, session and clock, writing as ``owner`` (a recipe that
        contends under another identity than its ledger's, such as a lease's standby)."""
        if owner == self.owner:
            return self
        return PipelineContext(self.client, self.paths, owner=owner, op_timeout=self.op_timeout, clock=self.clock)

    def call(
        self,
        body: Callable[[Call], T],
        *,
        what: str,
        request_id: str | None = None,
        find: Callable[[Call], T | None] | None = None,
        started: Call | None = None,
    ) -> T:
        """Run ``body`` within one deadline (see :meth:`Session.call`)."""
        if request_id is not None:
            validate_request_id(request_id)
        return self.session.call(body, what=what, timeout=self.op_timeout, request_id=request_id, find=find,
                                 started=started)

    def event(self, record: EventRecord) -> list[Step]:
        """The steps recording ``record`` in the history, to commit with the change it describes."""
        return event_ops(self.paths, record.kind, self.clock(), record.to_detail())

    # -- pipeline-level requests (configuration, rollback, consumers) ---------------------------

    def request_op(self, call: Call, what: str, result: Any) -> list[Step]:
        """The steps that record this call's request id and result under ``requests/<id>``.

        At :data:`MAX_REMEMBERED_REQUESTS` the request is refused (:class:`TooManyRequests`, nothing
        written); the folder's version is bumped with the record, so concurrent requests cannot pass
        the limit together (a lost race is a version conflict: the caller decides again).
        """
        record = Create(self.paths.request(call.request_id), RequestNode(what, self.clock(), result).to_bytes())
        folder = call.exists(self.paths.requests)
        if folder is None:
            return [record]  # no folder: the create fails and the caller reports it, as before
        if int(folder.numChildren) >= MAX_REMEMBERED_REQUESTS:
            raise TooManyRequests(
                f"pipeline {self.pipeline!r} remembers {folder.numChildren} pipeline-level request ids, at most "
                f"{MAX_REMEMBERED_REQUESTS}; the {what} was refused and nothing was written: compact the pipeline "
                "(ledger.compact()) or keep fewer epochs (retain_epochs) so that older request ids are forgotten"
            )
        return [SetData(self.paths.requests, b"", int(folder.version)), record]

    def stored_result(self, call: Call) -> Any:
        """The result this call's request id stored under ``requests/<id>``, or None if it is not there."""
        path = self.paths.request(call.request_id)
        raw = call.get(path)
        return None if raw is None else RequestNode.from_bytes(raw.data, path=path).result

    # -- the pipeline record -----------------------------------------------------------------

    def record(self, call: Call) -> PipelineRecord:
        raw = call.get(self.paths.base)
        if raw is None:
            raise PipelineNotFound(f"pipeline {self.pipeline!r} does not exist under {self.paths.root}")
        return PipelineRecord.from_bytes(raw.data, raw.stat.version, path=self.paths.base)

    # -- configuration -----------------------------------------------------------------------

    def config(self, call: Call, version: int) -> ConfigVersion:
        """Configuration ``version`` (read once per client: versions never change)."""
        path = self.paths.config(version)
        cached = self.session.cache.get(path)
        if isinstance(cached, ConfigVersion):
            return cached
        raw = call.get(path)
        if raw is None:
            if call.get(self.paths.base) is None:
                raise PipelineNotFound(f"pipeline {self.pipeline!r} does not exist under {self.paths.root}")
            raise CorruptPayload(f"pipeline {self.pipeline!r}: configuration version {version} is missing ({path})")
        loaded = decode_config(raw.data, version, path=path)
        self.session.cache[path] = loaded
        return loaded

    def config_for(self, call: Call, epoch: int, record: PipelineRecord | None = None) -> ConfigVersion:
        """The configuration version in force at ``epoch``."""
        validate_epoch(epoch)
        record = record or self.record(call)
        version = record.version_for(epoch)
        if version is None:
            raise UnknownPartition(f"pipeline {self.pipeline!r} has no configuration for epoch {epoch}")
        return self.config(call, version)
