"""Pipeline configuration: which partitions an epoch has and who produces each of them.

A configuration version names the first epoch it applies to, so every epoch resolves to exactly one
version (configuration changes are timestamped data, as in Megaphone).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_epochs.coordination.base.errors import InvalidConfig, InvalidInput, InvalidName
from airflow_epochs.coordination.base.locations import parse_location
from airflow_epochs.coordination.base.names import validate_name
from airflow_epochs.coordination.wire.declared import DeclaredProducers

MAX_PARTITIONS = 256
_MAX_PRODUCERS = 4096
_MAX_BUCKETS = 4096
# The most epochs a pipeline may keep in full: the ``epochs`` listing retention reads then stays
# under 10,000 x 14 bytes (a name of 10 digits and its length), far below ``jute.maxbuffer``.
MAX_RETAIN_EPOCHS = 10_000
# Configuration versions a pipeline may schedule in its life: the pipeline record lists them all and
# the ``config`` folder holds one znode each, so both stay a fixed size (docs: Bounded answers).
MAX_CONFIG_VERSIONS = 4096
# Epochs kept in full by default when the pipeline has an archive: none behind the frontier. A sealed
# epoch stays in ZooKeeper until the next compaction (the coordinator's, when the next epoch opens),
# then leaves it whole; every read of it, and a repeated vote, is answered from the archive
# (:mod:`.retention`, :mod:`.archive`). Each epoch kept would cost a fleet of 10,000 pipelines x 100
# partitions x 10 producers about 1.8 GB of ZooKeeper data (bench group ``capacity``), more than the
# open epoch's votes; keep more (``retain_epochs``) for a longer rollback reach.
DEFAULT_RETAIN_EPOCHS = 0
# Without an archive compaction forgets the past (seals, manifests, votes): the default window stays
# as long as before archives existed, so no pipeline loses readable epochs by not naming storage.
UNARCHIVED_RETAIN_EPOCHS = 1000
# ``retain_epochs`` not given: one of the two defaults above, by whether there is an archive.
_BY_ARCHIVE: Any = object()


def _default_retention(archive: str | None) -> int:
    """The ``retain_epochs`` a configuration gets when it names none."""
    return DEFAULT_RETAIN_EPOCHS if archive is not None else UNARCHIVED_RETAIN_EPOCHS


# A configuration is stored as one znode, next to its history record in one transaction.
_MAX_CONFIG_BYTES = 48 * 1024


@dataclass(frozen=True)
class PipelineConfig:
    """What an epoch looks like: partitions and their producers, barriers and their participants,
    the key-to-bucket map, and the backpressure window.

    :param partitions: partition name -> the producers registered for it. A pipeline with no
        partitions is allowed: its epochs are sealed by :meth:`EpochLedger.close_epoch` alone.
    :param barriers: barrier name -> the participants expected at it (participants may also
        register dynamically, see :class:`~airflow_epochs.coordination.recipes.barriers.barrier.Barrier`).
    :param buckets: the key-to-bucket map: ``buckets[b]`` is the worker that owns bucket ``b``;
        a key goes to bucket ``bucket_of(key, len(buckets))``.
    :param window: backpressure: epoch e does not open while e > slowest consumer's ack + window.
    :param retain_epochs: how many epochs behind the frontier are kept in full; older ones are
        compacted (their votes and history pruned, their frontier, snapshots and lineage kept).
        ``None`` keeps everything. Not given: 0 with an ``archive`` (a sealed epoch leaves ZooKeeper at
        the next compaction; the archive then answers every read of it), 1000 without one. 0 needs an
        ``archive``.
    :param archive: where compacted epochs go: a location in the pipeline's storage (an absolute
        local path or a ``file``/``s3``/``gs``/``hdfs``/``abfs`` URI without credentials, opened
        through pyarrow's filesystems). Before an epoch leaves ZooKeeper its full record is written
        there once, and reads of it are answered from there (see :mod:`.archive`). ``None`` (the
        default): compaction forgets the past, as before.
    :param declared: optional :class:`~airflow_epochs.coordination.wire.declared.DeclaredProducers`: the
        Airflow tasks or assets behind each partition's producers and the key -> epoch map, for
        producers that vote through the provider's listener; its producer names must be exactly the
        ``partitions``' producers.

    Every shape accepted here can be sealed: a seal's size does not depend on the producers' names,
    and a configuration too large to store next to its history record is refused.
    """

    partitions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    barriers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    buckets: tuple[str, ...] = ()
    window: int | None = None
    retain_epochs: int | None = _BY_ARCHIVE
    archive: str | None = None
    declared: DeclaredProducers | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", _name_lists(self.partitions, "partition", "producers"))
        object.__setattr__(self, "barriers", _name_lists(self.barriers, "barrier", "participants"))
        if isinstance(self.buckets, str) or not isinstance(self.buckets, Iterable):
            raise InvalidConfig(f"buckets must be a list of worker names, not {self.buckets!r}")
        buckets = tuple(self.buckets)
        if len(buckets) > _MAX_BUCKETS:
            raise InvalidConfig(f"{len(buckets)} buckets; at most {_MAX_BUCKETS}")
        _check_members(buckets, "bucket owner")
        object.__setattr__(self, "buckets", buckets)
        if self.window is not None and (
            isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1
        ):
            raise InvalidConfig(f"window must be a positive integer or None, not {self.window!r}")
        if self.retain_epochs is _BY_ARCHIVE:
            object.__setattr__(self, "retain_epochs", _default_retention(self.archive))
        lowest = 0 if self.archive is not None else 1  # without an archive, 0 would forget the frontier epoch
        if self.retain_epochs is not None and (
            isinstance(self.retain_epochs, bool) or not isinstance(self.retain_epochs, int)
            or self.retain_epochs < lowest
        ):
            raise InvalidConfig(f"retain_epochs must be an integer of at least {lowest} "
                                f"({'with' if lowest == 0 else 'without'} an archive) or None, not "
                                f"{self.retain_epochs!r}")
        if self.retain_epochs is not None and self.retain_epochs > MAX_RETAIN_EPOCHS:
            raise InvalidConfig(f"retain_epochs {self.retain_epochs!r} is more than {MAX_RETAIN_EPOCHS}, the most "
                                "epochs a pipeline keeps in ZooKeeper (older ones go to its archive)")
        if self.archive is not None:
            object.__setattr__(self, "archive", _validate_archive_location(self.archive))
        if self.declared is not None:
            _check_declared(self.declared, self.partitions)
        size = len(json.dumps(self.to_json(), separators=(",", ":")))
        if size > _MAX_CONFIG_BYTES:
            raise InvalidConfig(
                f"the configuration is {size} bytes as JSON; at most {_MAX_CONFIG_BYTES} fit in one znode "
                "(fewer or shorter partition, producer, participant or worker names)"
            )

    def replace(self, **changes: Any) -> PipelineConfig:
        """A copy with some fields changed."""
        fields = {"partitions": self.partitions, "barriers": self.barriers, "buckets": self.buckets,
                  "window": self.window, "retain_epochs": self.retain_epochs, "archive": self.archive,
                  "declared": self.declared, **changes}
        return PipelineConfig(**fields)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"partitions": {name: list(p) for name, p in self.partitions.items()}}
        if self.barriers:
            data["barriers"] = {name: list(p) for name, p in self.barriers.items()}
        if self.buckets:
            data["buckets"] = list(self.buckets)
        if self.window is not None:
            data["window"] = self.window
        if self.retain_epochs != _default_retention(self.archive):
            data["retain_epochs"] = self.retain_epochs
        if self.archive is not None:
            data["archive"] = self.archive
        if self.declared is not None:
            data["declared"] = self.declared.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PipelineConfig:
        partitions = data.get("partitions")
        if not isinstance(partitions, Mapping):
            raise InvalidConfig(f"config has no 'partitions' mapping: {data!r}")
        unknown = set(data) - {"partitions", "barriers", "buckets", "window", "retain_epochs", "archive", "from_epoch",
                               "schema", "kind", "declared"}
        if unknown:
            raise InvalidConfig(f"unknown config keys {sorted(unknown)}")
        declared = data.get("declared")
        if declared is not None and not isinstance(declared, Mapping):
            raise InvalidConfig(f"'declared' must be a mapping, not {declared!r}")
        barriers = data.get("barriers", {})
        if not isinstance(barriers, Mapping):
            raise InvalidConfig(f"'barriers' must be a mapping, not {barriers!r}")
        return cls(
            partitions={str(k): tuple(v) for k, v in partitions.items()},
            barriers={str(k): tuple(v) for k, v in barriers.items()},
            buckets=tuple(data.get("buckets", ())),
            window=data.get("window"),
            retain_epochs=data.get("retain_epochs", _BY_ARCHIVE),
            archive=data.get("archive"),
            declared=None if declared is None else DeclaredProducers.from_json(declared),
        )


# Storage an archive may live in (an allow-list: pyarrow's filesystems for these schemes).
_MAX_ARCHIVE_LOCATION = 1024


def _validate_archive_location(value: object) -> str:
    """An archive location, checked: canonical (:func:`~airflow_epochs.coordination.base.locations.parse_location`:
    an absolute local path or a URI of an allowed scheme, with no credentials, query, fragment, escapes or
    ``..``; the location is stored in ZooKeeper and shown in the UI, and every archive file is derived
    from it)."""
    if not isinstance(value, str) or not value or len(value) > _MAX_ARCHIVE_LOCATION:
        raise InvalidConfig(f"archive must be a path or URI of 1 to {_MAX_ARCHIVE_LOCATION} characters, not {value!r}")
    try:
        return parse_location("archive", value).text
    except InvalidInput as exc:
        raise InvalidConfig(str(exc)) from None


def _name_lists(value: object, kind: str, members: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, Mapping):
        raise InvalidConfig(f"{kind}s must be a mapping, not {type(value).__name__}")
    if len(value) > MAX_PARTITIONS:
        raise InvalidConfig(f"{len(value)} {kind}s; at most {MAX_PARTITIONS} per epoch")
    normalised: dict[str, tuple[str, ...]] = {}
    for name, names in value.items():
        try:
            validate_name(kind, name)
        except InvalidName as exc:
            raise InvalidConfig(str(exc)) from exc
        if isinstance(names, str) or not isinstance(names, Iterable):
            raise InvalidConfig(f"{members} of {kind} {name!r} must be a list of names, not {names!r}")
        plist = tuple(names)
        if not plist and kind == "partition":
            raise InvalidConfig(f"partition {name!r} has no producers; each partition needs at least one")
        if len(plist) > _MAX_PRODUCERS:
            raise InvalidConfig(f"{kind} {name!r} has {len(plist)} {members}; at most {_MAX_PRODUCERS}")
        _check_members(plist, f"{kind} {name!r}")
        duplicates = sorted(p for p, n in Counter(plist).items() if n > 1)
        if duplicates:
            raise InvalidConfig(f"{kind} {name!r} lists {members} more than once: {duplicates}")
        normalised[name] = plist
    return normalised


@dataclass(frozen=True)
class ConfigVersion:
    """One stored configuration version."""

    version: int
    from_epoch: int
    config: PipelineConfig


def _check_declared(declared: object, partitions: Mapping[str, tuple[str, ...]]) -> None:
    """Declared producers must name exactly the configuration's partitions and producers."""
    if not isinstance(declared, DeclaredProducers):
        raise InvalidConfig(f"declared must be a DeclaredProducers, not {declared!r}")
    names = declared.producer_names()
    for partition, producers in names.items():
        if partition not in partitions:
            raise InvalidConfig(f"declared partition {partition!r} is not one of the partitions {sorted(partitions)}")
        if set(producers) != set(partitions[partition]):
            raise InvalidConfig(f"partition {partition!r}: declared producers {sorted(producers)} differ from its "
                                f"producers {sorted(partitions[partition])}")


def _check_members(names: tuple[str, ...], where: str) -> None:
    """Producer, participant and worker names are znode-safe names too."""
    for member in names:
        try:
            validate_name("producer", member)
        except InvalidName as exc:
            raise InvalidConfig(f"{where}: {exc}") from exc
