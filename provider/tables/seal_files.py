"""What a publish takes from the ledger: the current seal of a partition at an epoch and the Parquet
files its manifests name (checked against the storage layout), and whether a published record is
still what the ledger has sealed."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_epochs.coordination.base.errors import EpochsError, InvalidInput, PartitionNotSealed
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.wire.manifests import RunManifest
from airflow_epochs.spark.sealed import sealed_outputs
from airflow_epochs.spark.storage import data_files
from airflow_epochs.tables import history as h
from airflow_epochs.tables.run_folders import check_run_folder


class PublishRefused(EpochsError):
    """The publish cannot go on as asked (e.g. files the manifest does not vouch for); nothing was committed."""


@dataclass(frozen=True)
class SealToPublish:
    """A current seal and the Parquet files its manifests name."""

    epoch: int
    attempt: int
    generation: int
    request: str
    files: tuple[str, ...]
    runs: tuple[str, ...] = ()  # the run directories holding the files
    version: int = 1  # the version of the seal the files are (2, 3, ... after re-seals)


def check_identifier(identifier: str) -> tuple[str, str]:
    """``namespace.table`` -> (namespace, table), each a plain name."""
    parts = identifier.split(".") if isinstance(identifier, str) else []
    if len(parts) != 2 or not all(p.replace("_", "a").isalnum() for p in parts):
        raise InvalidInput(f"an Iceberg table is named 'namespace.table' (letters, digits, _), not {identifier!r}")
    return parts[0], parts[1]


def still_sealed(ledger: EpochLedger, partition: str, record: h.PublishedSnapshot) -> bool:
    """Whether the table's publish ``record`` of ``partition`` is still what the ledger has sealed: the
    partition's current seal at that epoch is the one published (attempt, generation and request).

    False when the epoch was rolled back or the partition has no seal at it now (e.g. it left the
    configuration when the epoch was sealed again); true for an epoch retention compacted (its seal
    stood and is gone from ZooKeeper) or that the ledger never recorded.
    """
    info = ledger.epoch_info(record.epoch)
    if info is None or info.attempt_state == "compacted":  # retention dropped its seal, which stood
        return True
    if info.state == "rolled_back":
        return False
    seal = ledger.seal_record(record.epoch, partition)
    return seal is not None and (seal.attempt, seal.generation, seal.request) == \
        (record.attempt, record.generation, record.request)


def seal_to_publish(ledger: EpochLedger, partition: str, epoch: int, *, output: str = "data",
                    storage: str | None = None, version: int | None = None) -> SealToPublish:
    """The current seal of ``partition`` at ``epoch`` and its files, checked against the manifests.

    :param storage: the pipeline's storage root: every run folder must be inside it (when given).
    :param version: which version of the seal (None: the newest sealed one).
    :raises PartitionNotSealed: no current seal (unsealed, superseded or rolled back): nothing to publish.
    :raises RunOutsideStorage: a manifest names a folder that is not the seal's run folder (by the layout,
        under ``storage``); nothing is written.
    """
    seal = ledger.seal(epoch, partition)
    record = ledger.seal_record(epoch, partition)
    if seal is None or record is None:
        raise PartitionNotSealed(f"pipeline {ledger.pipeline!r}: partition {partition!r} is not sealed at epoch "
                                 f"{epoch}; nothing is published")
    files: list[str] = []
    runs: list[str] = []
    versions = {1}
    for item in sealed_outputs(ledger, partition, [epoch], output=output, version=version):
        versions = {item.version}
        check_run_folder(item.location, pipeline=ledger.pipeline, partition=partition, epoch=epoch,
                         attempt=item.attempt, storage=storage)
        if item.format != "parquet":
            raise PublishRefused(f"epoch {epoch}: {partition!r} output {output!r} of {item.producer!r} is "
                                 f"{item.format}; only Parquet outputs are published")
        found = [f"{item.path.rstrip('/')}/{name}" for name, _ in data_files(item.path)]
        view = ledger.corrections.sealed_version(epoch, partition, item.version) if item.version > 1 else None
        votes = seal.manifests if view is None else view.manifests
        run = RunManifest.from_vote(votes.get(item.producer), where=f"the vote of {item.producer!r}")
        voted = None if run is None else run.outputs.get(output)
        vouched = None if voted is None else voted.files
        if vouched is not None and int(vouched) != len(found):
            raise PublishRefused(f"epoch {epoch}: the manifest of {item.producer!r} names {vouched} file(s) under "
                                 f"{item.path}, {len(found)} are there; nothing is published")
        files += found
        runs.append(item.location)
    return SealToPublish(epoch, seal.attempt, seal.generation, record.request, tuple(files), tuple(runs),
                         max(versions))
