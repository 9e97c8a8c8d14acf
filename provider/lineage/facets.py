"""OpenLineage facets and datasets of an epoch task, built from what ZooKeeper recorded.

- The run facet ``airflowEpochs`` (:class:`EpochsRunFacet`): pipeline, epoch, partition, attempt,
  generation, the seal's request id and zxid, its producers, a SHA-256 digest of each producer's voted
  manifest, the lineage vector, and each producer's OpenLineage run (``producerRuns``: the seal's link
  to the runs that voted, from the ``lineage_run`` each vote recorded); its JSON schema ships in the package
  (``airflow_epochs/lineage/schemas/EpochsRunFacet.json``, see :func:`run_facet_schema`).
- A partition's dataset is named one way whoever emits it (:func:`partition_dataset_id`): the Iceberg
  table its producer publishes it into (the producer votes that name with its manifest,
  ``lineage_dataset``), else its storage location. The producing task's output, a task reading the
  sealed partition (its input) and ``PublishSealedOperator`` (its input) all name it so; a separate
  publish task's output is its table.
- The output: the partition's dataset with the epoch as a partition subset facet.
- The inputs: the sealed partitions the task read, each with the epoch it read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any
from urllib.parse import urlparse

import attr
from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.generated.base import InputDatasetFacet, OutputDatasetFacet, RunFacet
from openlineage.client.generated.base_subset_dataset import (
    InputSubsetInputDatasetFacet,
    OutputSubsetOutputDatasetFacet,
    Partition,
    PartitionSubsetCondition,
)

from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.wire.manifests import vote_lineage_dataset, vote_lineage_run, vote_location

FACET_NAME = "airflowEpochs"
SCHEMA_FILE = "EpochsRunFacet.json"
SCHEMA_URL = "urn:airflow-provider-epochs:schemas:EpochsRunFacet:1-0-0"
PRODUCER = "urn:airflow-provider-epochs"


def shipped_schema(file_name: str) -> dict[str, Any]:
    """A JSON schema of one of our facets, as shipped in the package (``lineage/schemas``)."""
    text = resources.files("airflow_epochs.lineage").joinpath("schemas", file_name).read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def run_facet_schema() -> dict[str, Any]:
    """The JSON schema of :class:`EpochsRunFacet`, as shipped in the package."""
    return shipped_schema(SCHEMA_FILE)


@attr.define
class EpochsRunFacet(RunFacet):
    """What the seal of the task's partition at its epoch recorded (see the shipped JSON schema)."""

    pipeline: str
    epoch: int
    partition: str
    attempt: int
    producers: list[str]
    sealed: bool
    generation: int = 0
    # camelCase names: OpenLineage's convention for facet fields
    sealRequest: str | None = None
    sealZxid: int | None = None
    manifestDigests: dict[str, str] = attr.field(factory=dict)
    lineageVector: dict[str, int] = attr.field(factory=dict)
    table: str | None = None
    snapshotId: int | None = None
    producerRuns: list[dict[str, str]] = attr.field(factory=list)

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_URL


def producer_runs(manifests: Mapping[str, Any]) -> list[dict[str, str]]:
    """The OpenLineage run of each producer whose vote recorded one (``lineage_run``), by producer name:
    the seal's link to the runs that made the partition."""
    runs = []
    for producer in sorted(manifests):
        run = vote_lineage_run(manifests[producer])
        if run is not None:
            runs.append({"producer": producer, **run.to_json()})
    return runs


def manifest_digest(manifest: Any) -> str:
    """SHA-256 of a voted manifest in canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(manifest, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def storage_dataset_id(storage: str, pipeline: str, partition: str) -> tuple[str, str]:
    """(namespace, name) of a partition's storage location, after OpenLineage's naming of files."""
    parsed = urlparse(storage)
    scheme = parsed.scheme if parsed.scheme and parsed.scheme != "file" else "file"
    namespace = scheme if scheme == "file" else f"{scheme}://{parsed.netloc}"
    path = parsed.path if parsed.scheme else storage
    return namespace, f"{path.rstrip('/')}/{pipeline}/{partition}"


def partition_dataset_id(ledger: EpochLedger, partition: str, epoch: int, *,
                         storage: str | None = None) -> tuple[str, str] | None:
    """(namespace, name) of the sealed ``partition`` at ``epoch``: the dataset a producer voted with its
    manifest (the table it publishes into), else the storage location its manifests name (or, with no
    seal, ``storage``); None when neither is known."""
    seal = ledger.seal(epoch, partition)
    manifests: Mapping[str, Any] = seal.manifests if seal is not None else {}
    for producer in sorted(manifests):
        declared = vote_lineage_dataset(manifests[producer])
        if declared is not None:
            return declared
    marker = f"/{ledger.pipeline}/{partition}/epoch="
    for producer in sorted(manifests):
        location = vote_location(manifests[producer])
        if location is not None and marker in location:
            return storage_dataset_id(location.rsplit(marker, 1)[0], ledger.pipeline, partition)
    return None if storage is None else storage_dataset_id(storage, ledger.pipeline, partition)


def table_dataset_id(catalog_name: str, table: str) -> tuple[str, str]:
    """(namespace, name) of a published Iceberg table."""
    return f"iceberg://{catalog_name}", table


def epoch_partition(epoch: int) -> PartitionSubsetCondition:
    return PartitionSubsetCondition(partitions=[Partition(dimensions={"epoch": str(epoch)}, identifier=str(epoch))])


def run_facet(ledger: EpochLedger, partition: str, epoch: int, *, producer: str, attempt: int,
              table: str | None = None, snapshot_id: int | None = None) -> EpochsRunFacet:
    """The run facet from the seal (or, before the seal, from this task's own attempt and producer)."""
    seal = ledger.seal(epoch, partition)
    if seal is None:
        return EpochsRunFacet(pipeline=ledger.pipeline, epoch=epoch, partition=partition, attempt=attempt,
                              producers=[producer], sealed=False, table=table, snapshotId=snapshot_id,
                              producer=PRODUCER)
    record = ledger.seal_record(epoch, partition)
    return EpochsRunFacet(
        pipeline=ledger.pipeline, epoch=epoch, partition=partition, attempt=seal.attempt,
        producers=list(seal.producers), sealed=True, generation=seal.generation,
        sealRequest=None if record is None else record.request,
        sealZxid=seal.zxid, manifestDigests={p: manifest_digest(m) for p, m in seal.manifests.items()},
        lineageVector={k: int(v) for k, v in seal.upstream.items()}, table=table, snapshotId=snapshot_id,
        producerRuns=producer_runs(seal.manifests), producer=PRODUCER)


def output_dataset(namespace: str, name: str, epoch: int | None) -> OutputDataset:
    facets: dict[str, OutputDatasetFacet] = {}
    if epoch is not None:
        facets["subset"] = OutputSubsetOutputDatasetFacet(outputCondition=epoch_partition(epoch), producer=PRODUCER)
    return OutputDataset(namespace=namespace, name=name, outputFacets=facets)


def input_datasets(ids: Mapping[str, tuple[str, str]], epoch: int | None) -> list[InputDataset]:
    """One input per sealed partition read (name -> (namespace, name)), each with the epoch it read."""
    found = []
    for namespace, name in ids.values():
        facets: dict[str, InputDatasetFacet] = {}
        if epoch is not None:
            facets["subset"] = InputSubsetInputDatasetFacet(inputCondition=epoch_partition(epoch), producer=PRODUCER)
        found.append(InputDataset(namespace=namespace, name=name, inputFacets=facets))
    return found
