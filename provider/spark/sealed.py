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
from airflow_epochs.coordination.wire.manifests import RunManifest
from airflow_epochs.spark.run_paths import check_in_run, seal_run_folder

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
    version: int = 1  # the version of the seal read (2, 3, ... after re-seals; see EpochLedger.reseal)


def sealed_outputs(ledger: EpochLedger, partition: str, epochs: Iterable[int], *,
                   output: str = "data", version: int | None = None) -> list[SealedOutput]:
    """The sealed outputs named ``output`` of ``partition`` at ``epochs``, in epoch order.

    :param version: which version of each seal to read (None: the newest, after any re-seal; 1: the
        original seal); each output names the version it came from.
    :raises PartitionNotSealed: an epoch's partition is not sealed (its data is not visible yet), or has
        no sealed ``version``.
    :raises ~airflow_epochs.spark.run_paths.OutsideRunFolder: a manifest names a run folder that is not
        the seal's, or an output path outside its run folder (nothing is read).
    """
    wanted = sorted({validate_epoch(e) for e in epochs})
    if not wanted:
        raise InvalidInput("no epochs given to read")
    found: list[SealedOutput] = []
    for epoch in wanted:
        seal = ledger.corrections.sealed_version(epoch, partition, version)
        if seal is None:
            which = "" if version is None else f" as version {version}"
            raise PartitionNotSealed(
                f"pipeline {ledger.pipeline!r}: partition {partition!r} is not sealed{which} at epoch {epoch} "
                f"(frontier {ledger.frontier()}); its output is not visible"
            )
        for producer in list(seal.manifests):
            run = RunManifest.from_vote(seal.manifests.get(producer), where=f"the vote of {producer!r}")
            item = None if run is None else run.outputs.get(output)
            if run is None or item is None:
                continue  # this producer voted without writing that output (e.g. a non-Spark vote)
            # Checked before anything reads, publishes or deletes it: a manifest comes from ZooKeeper.
            folder = seal_run_folder(run.location, pipeline=ledger.pipeline, partition=partition, epoch=epoch,
                                     attempt=seal.attempt)
            path = check_in_run(folder, item.path, f"output {output!r}")
            found.append(SealedOutput(epoch, partition, producer, seal.attempt, folder.text, path.text, item.format,
                                      item.rows, item.checksum, seal.version))
    return found


def sealed_runs(ledger: EpochLedger, partition: str, epoch: int) -> list[str]:
    """The run directories the seal of ``partition`` at ``epoch`` names (what garbage collection keeps).

    :raises ~airflow_epochs.spark.run_paths.OutsideRunFolder: a manifest names a folder that is not a run
        folder of the seal.
    """
    newest = ledger.corrections.sealed_version(epoch, partition)
    if newest is None:
        return []
    kept: set[str] = set()
    for version in range(1, newest.version + 1):  # every version's runs: an older version stays readable
        seal = newest if version == newest.version else ledger.corrections.sealed_version(epoch, partition, version)
        if seal is None:
            continue
        runs = (RunManifest.from_vote(vote, where=f"the vote of {producer!r}") for producer, vote in
                seal.manifests.items())
        kept |= {seal_run_folder(run.location, pipeline=ledger.pipeline, partition=partition, epoch=epoch,
                                 attempt=seal.attempt).text for run in runs if run is not None and run.location}
    return sorted(kept)


def read_sealed(spark: Any, pipeline: str, partition: str, epochs: Iterable[int], *,
                zookeeper: KazooClient | EpochLedger, output: str = "data", root: str = DEFAULT_ROOT,
                with_epoch: bool = True, version: int | None = None) -> DataFrame:
    """A DataFrame of the sealed ``output`` of ``partition`` at ``epochs`` (one union over the manifests).

    :param zookeeper: a started KazooClient, or an :class:`EpochLedger` of ``pipeline``.
    :param with_epoch: add an ``epoch`` column saying which epoch each row came from.
    :param version: the version of each seal to read (None: the newest); see :func:`sealed_outputs`.
    :raises PartitionNotSealed: an epoch's partition is not sealed.
    """
    from pyspark.sql import functions as F

    ledger = zookeeper if isinstance(zookeeper, EpochLedger) else EpochLedger(zookeeper, pipeline, root=root)
    if ledger.pipeline != pipeline:
        raise InvalidInput(f"the ledger is for pipeline {ledger.pipeline!r}, not {pipeline!r}")
    frames: list[DataFrame] = []
    for item in sealed_outputs(ledger, partition, epochs, output=output, version=version):
        frame = spark.read.format(item.format).load(item.path)
        frames.append(frame.withColumn("epoch", F.lit(item.epoch)) if with_epoch else frame)
    if not frames:
        raise PartitionNotSealed(f"pipeline {pipeline!r}: partition {partition!r} has no sealed output {output!r}")
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame, allowMissingColumns=True)
    return result
