"""The OpenLineage run facet of a correction's re-runs (``airflowEpochsCorrection``): which version a user
asked for, the correction it started, its plan, and every version the run re-produced and sealed; and
the lineage of :class:`~airflow_epochs.operators.SparkCorrectionOperator` (each re-produced partition as
an output, with the epochs it re-sealed as its partition subset). Its JSON schema ships in the package
(``airflow_epochs/lineage/schemas/EpochsCorrectionRunFacet.json``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attr
from openlineage.client.event_v2 import OutputDataset
from openlineage.client.generated.base import OutputDatasetFacet, RunFacet
from openlineage.client.generated.base_subset_dataset import (
    OutputSubsetOutputDatasetFacet,
    Partition,
    PartitionSubsetCondition,
)

from airflow_epochs.lineage.facets import PRODUCER, shipped_schema

CORRECTION_FACET_NAME = "airflowEpochsCorrection"
CORRECTION_SCHEMA_FILE = "EpochsCorrectionRunFacet.json"
CORRECTION_SCHEMA_URL = "urn:airflow-provider-epochs:schemas:EpochsCorrectionRunFacet:1-0-0"


def correction_facet_schema() -> dict[str, Any]:
    """The JSON schema of :class:`EpochsCorrectionRunFacet`, as shipped in the package."""
    return shipped_schema(CORRECTION_SCHEMA_FILE)


@attr.define
class EpochsCorrectionRunFacet(RunFacet):
    """A correction's re-run (see the shipped JSON schema); versions are ``{epoch, partition, version}``."""

    pipeline: str
    correction: str
    origin: dict[str, Any]
    state: str
    resealed: list[dict[str, Any]]
    reason: str = ""
    plan: list[dict[str, Any]] = attr.field(factory=list)

    @staticmethod
    def _get_schema() -> str:
        return CORRECTION_SCHEMA_URL


def correction_facet(pipeline: str, result: Mapping[str, Any], origin: Mapping[str, Any],
                     reason: str = "") -> EpochsCorrectionRunFacet:
    """The facet from what the operator returned (``result``) and the re-seal it started from (``origin``)."""
    return EpochsCorrectionRunFacet(
        pipeline=pipeline, correction=str(result["correction"]), state=str(result["state"]), reason=reason,
        origin={"epoch": int(origin["epoch"]), "partition": str(origin["partition"]),
                "version": int(origin["version"])},
        plan=[{"epoch": int(e), "partition": str(p)} for e, p in result.get("plan") or []],
        resealed=[{"epoch": int(v["epoch"]), "partition": str(v["partition"]), "version": int(v["version"])}
                  for v in result.get("resealed") or []],
        producer=PRODUCER)


def resealed_outputs(ids: Mapping[str, tuple[str, str]], resealed: Sequence[Mapping[str, Any]]) -> list[OutputDataset]:
    """One output per re-produced partition (partition -> (namespace, name)), its subset the epochs re-sealed."""
    out = []
    for partition, (namespace, name) in sorted(ids.items()):
        epochs = sorted({int(v["epoch"]) for v in resealed if v["partition"] == partition})
        if not epochs:
            continue
        condition = PartitionSubsetCondition(partitions=[
            Partition(dimensions={"epoch": str(e)}, identifier=str(e)) for e in epochs])
        facets: dict[str, OutputDatasetFacet] = {
            "subset": OutputSubsetOutputDatasetFacet(outputCondition=condition, producer=PRODUCER)}
        out.append(OutputDataset(namespace=namespace, name=name, outputFacets=facets))
    return out
