"""The epoch context a Spark job receives: who it is, which epoch, where to read and where to write.

Plain data with a JSON form, so it travels as one ``spark-submit`` argument or one Python object to a
Spark Connect session. It imports neither Airflow nor kazoo: a PySpark driver needs only this package.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_epochs.coordination.base.errors import InvalidInput
from airflow_epochs.coordination.base.names import validate_epoch, validate_name
from airflow_epochs.redaction import redact_uri
from airflow_epochs.spark.locations import validate_location

CONTEXT_ARG = "--epoch-context"
# The same JSON in a file (0600) instead of the command line, which every local user can read in the
# process list and which spark-submit's command line log shows: used when the driver runs on this host.
CONTEXT_FILE_ARG = "--epoch-context-file"
_RUN_ID = re.compile(r"[0-9a-f]{8,32}")  # fullmatch: '$' would accept a trailing newline


def _is_location(value: object) -> bool:
    if isinstance(value, str):
        return bool(value)
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, str) and v for v in value)


@dataclass(frozen=True)
class EpochContext:
    """Everything one producer's job needs for one epoch.

    :param pipeline: pipeline name.
    :param partition: the partition this job writes.
    :param producer: this producer's name (it votes for ``partition``).
    :param epoch: the epoch number.
    :param attempt: the epoch attempt's fencing token.
    :param config_version: the configuration version the epoch runs under.
    :param run: this submission's id; separates two submissions inside one attempt (a retried task
        whose first driver may still be running).
    :param storage: root URI of the pipeline's storage (``/data/epochs``, ``file:///...``, ``s3://...``).
    :param inputs: named input locations of this epoch (one location, or a list of them).
    :param snapshot: pointer to the last sealed snapshot (``{"path": ..., "epoch": ...}``), or None.
    :param buckets: the key buckets this producer owns at this epoch (empty: all).
    """

    pipeline: str
    partition: str
    producer: str
    epoch: int
    attempt: int
    config_version: int
    run: str
    storage: str
    inputs: Mapping[str, str | Sequence[str]] = field(default_factory=dict)
    snapshot: Mapping[str, Any] | None = None
    buckets: Sequence[int] = ()

    def __post_init__(self) -> None:
        validate_name("pipeline", self.pipeline)
        validate_name("partition", self.partition)
        validate_name("producer", self.producer)
        validate_epoch(self.epoch)
        for what, value in (("attempt", self.attempt), ("config_version", self.config_version)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInput(f"epoch context: {what} must be a non-negative integer, not {value!r}")
        if not isinstance(self.run, str) or not _RUN_ID.fullmatch(self.run):
            raise InvalidInput(f"epoch context: run must be 8-32 lowercase hex digits, not {self.run!r}")
        validate_location("epoch context: storage", self.storage)
        if not isinstance(self.inputs, Mapping) or not all(
            isinstance(k, str) and _is_location(v) for k, v in self.inputs.items()
        ):
            raise InvalidInput(f"epoch context: inputs must map names to locations, not {self.inputs!r}")
        for name, locations in self.inputs.items():
            validate_name("input", name)
            for location in [locations] if isinstance(locations, str) else locations:
                validate_location(f"epoch context: input {name!r}", location)
        if self.snapshot is not None and not (isinstance(self.snapshot, Mapping) and
                                              isinstance(self.snapshot.get("path"), str)):
            raise InvalidInput(f"epoch context: snapshot must be None or a pointer with a path, not {self.snapshot!r}")
        if any(isinstance(b, bool) or not isinstance(b, int) or b < 0 for b in self.buckets):
            raise InvalidInput(f"epoch context: buckets must be non-negative integers, not {self.buckets!r}")

    def __repr__(self) -> str:  # storage URIs may carry credentials: never show them in logs or tracebacks
        return redact_uri(f"EpochContext({self.to_json()})")

    def to_json(self) -> str:
        return json.dumps({
            "pipeline": self.pipeline, "partition": self.partition, "producer": self.producer,
            "epoch": self.epoch, "attempt": self.attempt, "config_version": self.config_version,
            "run": self.run, "storage": self.storage,
            "inputs": {k: v if isinstance(v, str) else list(v) for k, v in self.inputs.items()},
            "snapshot": None if self.snapshot is None else dict(self.snapshot), "buckets": list(self.buckets),
        }, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> EpochContext:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InvalidInput(f"epoch context is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidInput(f"epoch context must be a JSON object, not {type(data).__name__}")
        known = {"pipeline", "partition", "producer", "epoch", "attempt", "config_version", "run", "storage",
                 "inputs", "snapshot", "buckets"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidInput(f"epoch context has unknown fields {unknown}")
        try:
            return cls(**{**data, "buckets": tuple(data.get("buckets") or ())})
        except TypeError as exc:
            raise InvalidInput(f"epoch context is incomplete: {exc}") from None

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> EpochContext:
        """Find ``--epoch-context <json>`` among a driver's arguments."""
        args = list(argv)
        for i, arg in enumerate(args):
            if arg == CONTEXT_FILE_ARG and i + 1 < len(args):
                try:
                    with open(args[i + 1], encoding="utf-8") as handle:
                        return cls.from_json(handle.read())
                except OSError as exc:
                    raise InvalidInput(f"epoch context file {args[i + 1]!r} cannot be read: {exc}") from None
            if arg == CONTEXT_ARG and i + 1 < len(args):
                return cls.from_json(args[i + 1])
            if arg.startswith(CONTEXT_ARG + "="):
                return cls.from_json(arg.split("=", 1)[1])
        raise InvalidInput(f"no {CONTEXT_ARG} argument: this job must be started by an epoch operator")
