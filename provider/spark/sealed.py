"""Reading sealed output: the only way a consumer sees epoch data.

A reader resolves locations through the seals' manifests in ZooKeeper, never by listing directories,
so output of a failed, killed or superseded attempt (which has no seal) is invisible by construction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_epochs.coordination.base.errors import InvalidInput, PartitionNotSealed
from airflow_epochs.coordination.base.names import validate_epoch
from airflow_epochs.coordination.base.paths import DEFAULT_ROOT
from airflow_epochs.coordination.ledger import EpochLedger

if TYPE_CHECKING:
    from kazoo.client import KazooClient
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class SealedOutput:
    """One producer's output of a sealed partition at one epoch, as its manifest describes it."""

    epoch: int
    partition: str
    producer: str
    attempt: int
    location: str  # the run directory
    path: str
    format: str
    rows: int
    checksum: str


def sealed_outputs(ledger: EpochLedger, partition: str, epochs: Iterable[int], *,
                   output: str = "data") -> list[SealedOutput]:
    """The sealed outputs named ``output`` of ``partition`` at ``epochs``, in epoch order.

    :raises PartitionNotSealed: an epoch's partition is not sealed (its data is not visible yet).
    """
    wanted = sorted({validate_epoch(e) for e in epochs})
    if not wanted:
        raise InvalidInput("no epochs given to read")
    found: list[SealedOutput] = []
    for epoch in wanted:
        seal = ledger.seal(epoch, partition)
        if seal is None:
            raise PartitionNotSealed(
                f"pipeline {ledger.pipeline!r}: partition {partition!r} is not sealed at epoch {epoch} "
                f"(frontier {ledger.frontier()}); its output is not visible"
            )
        for producer in seal.producers:
            manifest: Any = seal.manifests.get(producer) or {}
            item = (manifest.get("outputs") or {}).get(output) if isinstance(manifest, dict) else None
            if item is None:
                continue  # this producer voted without writing that output (e.g. a non-Spark vote)
            found.append(SealedOutput(epoch, partition, producer, seal.attempt, str(manifest.get("location")),
                                      str(item["path"]), str(item.get("format", "parquet")), int(item["rows"]),
                                      str(item["checksum"])))
    return found


def sealed_runs(ledger: EpochLedger, partition: str, epoch: int) -> list[str]:
    """The run directories the seal of ``partition`` at ``epoch`` names (what garbage collection keeps)."""
    seal = ledger.seal(epoch, partition)
    if seal is None:
        return []
    return sorted({str(m["location"]) for m in seal.manifests.values() if isinstance(m, dict) and m.get("location")})


def read_sealed(spark: Any, pipeline: str, partition: str, epochs: Iterable[int], *,
                zookeeper: KazooClient | EpochLedger, output: str = "data", root: str = DEFAULT_ROOT,
                with_epoch: bool = True) -> DataFrame:
    """A DataFrame of the sealed ``output`` of ``partition`` at ``epochs`` (one union over the manifests).

    :param zookeeper: a started KazooClient, or an :class:`EpochLedger` of ``pipeline``.
    :param with_epoch: add an ``epoch`` column saying which epoch each row came from.
    :raises PartitionNotSealed: an epoch's partition is not sealed.
    """
    from pyspark.sql import functions as F

    ledger = zookeeper if isinstance(zookeeper, EpochLedger) else EpochLedger(zookeeper, pipeline, root=root)
    if ledger.pipeline != pipeline:
        raise InvalidInput(f"the ledger is for pipeline {ledger.pipeline!r}, not {pipeline!r}")
    frames: list[DataFrame] = []
    for item in sealed_outputs(ledger, partition, epochs, output=output):
        frame = spark.read.format(item.format).load(item.path)
        frames.append(frame.withColumn("epoch", F.lit(item.epoch)) if with_epoch else frame)
    if not frames:
        raise PartitionNotSealed(f"pipeline {pipeline!r}: partition {partition!r} has no sealed output {output!r}")
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame, allowMissingColumns=True)
    return result
