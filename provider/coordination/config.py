"""Pipeline configuration: which partitions an epoch has and who produces each of them.

A configuration version names the first epoch it applies to, so every epoch resolves to exactly one
version (configuration changes are timestamped data, as in Megaphone).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_epochs.coordination.errors import InvalidConfig, InvalidName
from airflow_epochs.coordination.names import validate_name

MAX_PARTITIONS = 256
MAX_PRODUCERS = 256


@dataclass(frozen=True)
class PipelineConfig:
    """Partitions of each epoch and the producers that must vote before a partition is sealed.

    :param partitions: partition name -> the producers registered for it. A pipeline with no
        partitions is allowed: its epochs are sealed by :meth:`EpochLedger.close_epoch` alone.
    """

    partitions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.partitions, Mapping):
            raise InvalidConfig(f"partitions must be a mapping, not {type(self.partitions).__name__}")
        if len(self.partitions) > MAX_PARTITIONS:
            raise InvalidConfig(f"{len(self.partitions)} partitions; at most {MAX_PARTITIONS} per epoch")
        normalised: dict[str, tuple[str, ...]] = {}
        for name, producers in self.partitions.items():
            try:
                validate_name("partition", name)
            except InvalidName as exc:
                raise InvalidConfig(str(exc)) from exc
            if isinstance(producers, str) or not isinstance(producers, Iterable):
                raise InvalidConfig(f"producers of partition {name!r} must be a list of names, not {producers!r}")
            plist = tuple(producers)
            if not plist:
                raise InvalidConfig(f"partition {name!r} has no producers; each partition needs at least one")
            if len(plist) > MAX_PRODUCERS:
                raise InvalidConfig(f"partition {name!r} has {len(plist)} producers; at most {MAX_PRODUCERS}")
            for producer in plist:
                try:
                    validate_name("producer", producer)
                except InvalidName as exc:
                    raise InvalidConfig(f"partition {name!r}: {exc}") from exc
            duplicates = sorted({p for p in plist if plist.count(p) > 1})
            if duplicates:
                raise InvalidConfig(f"partition {name!r} lists producers more than once: {duplicates}")
            normalised[name] = plist
        object.__setattr__(self, "partitions", normalised)

    @classmethod
    def single(cls, partition: str, *producers: str) -> PipelineConfig:
        """A configuration with one partition (a convenience for scripts and tests)."""
        return cls({partition: producers or (partition,)})

    def producers(self, partition: str) -> tuple[str, ...]:
        return self.partitions[partition]

    def to_json(self) -> dict[str, Any]:
        return {"partitions": {name: list(producers) for name, producers in self.partitions.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PipelineConfig:
        partitions = data.get("partitions")
        if not isinstance(partitions, Mapping):
            raise InvalidConfig(f"config has no 'partitions' mapping: {data!r}")
        return cls({str(k): tuple(v) for k, v in partitions.items()})


@dataclass(frozen=True)
class ConfigVersion:
    """One stored configuration version."""

    version: int
    from_epoch: int
    config: PipelineConfig
