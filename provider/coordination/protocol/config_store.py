"""Creating a pipeline and scheduling its configuration versions.

The pipeline record names the request that created it; every configuration version names the
request that scheduled it. Neither is ever deleted, so those requests can always be found again:
a repeat of either returns what the first call did, however long ago (``requests/<id>`` holds the
result too, for a fast answer, until retention forgets it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kazoo.exceptions import NodeExistsError

from airflow_epochs.coordination.base.acl import verify_pipeline_acls
from airflow_epochs.coordination.base.call import Call, commit_or_conflict
from airflow_epochs.coordination.base.errors import (
    ConfigConflict,
    InvalidConfig,
    InvalidInput,
    PipelineExists,
    PipelineNotFound,
)
from airflow_epochs.coordination.base.names import validate_epoch
from airflow_epochs.coordination.base.steps import Create, SetData, Step
from airflow_epochs.coordination.protocol.retention import delete_tree
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.wire.config import MAX_CONFIG_VERSIONS, ConfigVersion, PipelineConfig
from airflow_epochs.coordination.wire.events import ConfigSet, PipelineCreated
from airflow_epochs.coordination.wire.nodes import FrontierNode, PipelineRecord, config_request, encode_config


def create_pipeline(
    ctx: PipelineContext, config: PipelineConfig, *, first_epoch: int = 1, exist_ok: bool = True,
    request_id: str | None = None,
) -> ConfigVersion:
    """Create the pipeline's subtree with its first configuration version (see ``EpochLedger``)."""
    if not isinstance(config, PipelineConfig):
        raise InvalidConfig(f"config must be a PipelineConfig, not {type(config).__name__}")
    validate_epoch(first_epoch, what="first_epoch")
    p = ctx.paths

    def existing(call: Call, record: PipelineRecord) -> ConfigVersion:
        return ctx.config_for(call, max(first_epoch, record.first_epoch), record)

    def body(call: Call) -> ConfigVersion:
        # A subtree someone else created (and can write) is never adopted: checked on every round,
        # so a creation racing with ours is checked too.
        verify_pipeline_acls(ctx.client, p)
        if call.get(p.base) is not None:
            if not exist_ok:
                raise PipelineExists(f"pipeline {ctx.pipeline!r} exists already under {p.root}; nothing was written")
            return existing(call, ctx.record(call))
        if call.exists(p.root) is None:
            ensure_path(call, p.root)
        commit_or_conflict(call, _creation_ops(ctx, call, config, first_epoch))
        return ConfigVersion(0, first_epoch, config)

    def find(call: Call) -> ConfigVersion | None:
        if call.get(p.base) is None:
            return None
        record = ctx.record(call)
        return existing(call, record) if record.request == call.request_id else None

    return ctx.call(body, what=f"create pipeline {ctx.pipeline!r}", request_id=request_id, find=find)


def _creation_ops(ctx: PipelineContext, call: Call, config: PipelineConfig, first_epoch: int) -> list[Step]:
    """The one transaction that creates a pipeline's subtree."""
    p = ctx.paths
    record = PipelineRecord(first_epoch=first_epoch, newest_epoch=first_epoch - 1, configs=((0, first_epoch),),
                            compacted_through=first_epoch - 1, created_at=ctx.clock(), request=call.request_id)
    return [
        Create(p.base, record.to_bytes()),
        Create(p.config_dir),
        Create(p.config(0), encode_config(config, first_epoch, call.request_id)),
        Create(p.epochs),
        Create(p.frontier, FrontierNode(first_epoch - 1).to_bytes()),
        Create(p.history),
        Create(p.snapshots),
        Create(p.requests),
        Create(p.consumers),
        Create(p.locks),
        *ctx.event(PipelineCreated(first_epoch=first_epoch, config=config.to_json())),
    ]


def ensure_path(call: Call, path: str) -> None:
    """Create ``path`` and its missing parents (empty znodes); a concurrent creator is fine."""
    current = ""
    for seg in (seg for seg in path.split("/") if seg):
        current += "/" + seg
        if call.exists(current) is None:
            failure = call.try_commit([Create(current)])
            if failure is not None and not isinstance(failure.error, NodeExistsError):
                raise failure.error


def set_configs(
    ctx: PipelineContext, changes: Sequence[tuple[PipelineConfig, int]], *, request_id: str | None = None
) -> list[ConfigVersion]:
    """Schedule several configuration versions in one transaction (see ``EpochLedger.set_configs``)."""
    if not changes:
        raise InvalidConfig("no configuration changes given")
    for config, from_epoch in changes:
        if not isinstance(config, PipelineConfig):
            raise InvalidConfig(f"config must be a PipelineConfig, not {type(config).__name__}")
        validate_epoch(from_epoch, what="from_epoch")
        encode_config(config, from_epoch)  # size and shape checked before anything is written

    def result_of(stored: Any) -> list[ConfigVersion]:
        return [ConfigVersion(int(v), int(f), config) for (v, f), (config, _) in zip(stored, changes, strict=True)]

    def body(call: Call) -> list[ConfigVersion]:
        record = ctx.record(call)
        for _, from_epoch in changes:
            _check_from_epoch(ctx, record, from_epoch)
        start = max(v for v, _ in record.configs) + 1
        if len(record.configs) + len(changes) > MAX_CONFIG_VERSIONS:
            raise ConfigConflict(
                f"pipeline {ctx.pipeline!r} has {len(record.configs)} configuration versions; {len(changes)} more "
                f"would pass the limit of {MAX_CONFIG_VERSIONS} (the pipeline record lists every version); "
                "nothing was written"
            )
        new = [(start + i, from_epoch) for i, (_, from_epoch) in enumerate(changes)]
        ops: list[Step] = [
            SetData(ctx.paths.base, record.to_bytes(configs=[*[list(c) for c in record.configs],
                                                             *[list(c) for c in new]]), record.version),
            *ctx.request_op(call, "set_configs", [list(c) for c in new]),
        ]
        for (version, from_epoch), (config, _) in zip(new, changes, strict=True):
            ops += [Create(ctx.paths.config(version), encode_config(config, from_epoch, call.request_id)),
                    *ctx.event(ConfigSet(from_epoch=from_epoch, version=version, config=config.to_json()))]
        commit_or_conflict(call, ops)
        ctx.known_record = None
        return result_of(new)

    def find(call: Call) -> list[ConfigVersion] | None:
        stored = ctx.stored_result(call)
        if stored is None:  # forgotten by retention? the versions themselves name their request
            stored = _scheduled_by(call, ctx, call.request_id) or None
        return None if stored is None else result_of(stored)

    return ctx.call(body, what=f"set the configuration of {ctx.pipeline!r}", request_id=request_id, find=find)


def _check_from_epoch(ctx: PipelineContext, record: PipelineRecord, from_epoch: int) -> None:
    """Refuse a configuration that would start at an epoch already opened, or before the first."""
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


def _scheduled_by(call: Call, ctx: PipelineContext, request_id: str) -> list[list[int]]:
    """The ``[version, from_epoch]`` pairs of the configuration versions ``request_id`` scheduled."""
    record = ctx.record(call)
    paths = [ctx.paths.config(version) for version, _ in record.configs]
    out: list[list[int]] = []
    for (version, from_epoch), raw, path in zip(record.configs, call.get_many(paths), paths, strict=True):
        if raw is not None and config_request(raw.data, path=path) == request_id:
            out.append([version, from_epoch])
    return out


def delete_pipeline(ctx: PipelineContext, *, confirm: str) -> int:
    """Delete the pipeline's whole subtree (a test pipeline, a stray one); returns the znodes deleted.
    ``confirm`` must be the pipeline's name (an accident is refused before anything is read). Deepest
    first, in batches; a writer that creates a node meanwhile makes the walk go again below it. An
    archive in the pipeline's storage is not touched.

    :raises InvalidInput: ``confirm`` is not the pipeline's name. :raises PipelineNotFound: no such pipeline.
    """
    if confirm != ctx.pipeline:
        raise InvalidInput(f"deleting pipeline {ctx.pipeline!r} needs confirm={ctx.pipeline!r}, not {confirm!r}; "
                           "nothing was deleted")

    def run(call: Call) -> int:
        if call.exists(ctx.paths.base) is None:
            raise PipelineNotFound(f"no pipeline {ctx.pipeline!r} under {ctx.paths.root}: nothing deleted")
        return delete_tree(call, ctx.paths.base)

    return ctx.call(run, what=f"delete pipeline {ctx.pipeline!r}")
