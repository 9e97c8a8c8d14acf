"""A JSON schema (draft 2020-12) of the OpenLineage 2-0-2 run event and of the standard facets our events
carry, written for this project from the spec's documentation (no installed package ships the spec's files).

What it encodes:

- the run event: ``eventTime`` (date-time), ``producer`` and ``schemaURL`` (URIs), ``run`` (``runId`` a
  UUID), ``job`` (``namespace``, ``name``), ``eventType`` (one of the spec's six states), and the
  ``inputs`` / ``outputs`` datasets (``namespace``, ``name``, ``facets``, ``inputFacets`` / ``outputFacets``);
- every facet: an object with the ``_producer`` and ``_schemaURL`` URIs, other fields free (the spec lets
  a facet carry anything more); job and dataset facets may carry a boolean ``_deleted``;
- the standard facets the Airflow provider and our operators put on our events, each with its fields:
  ``parent``, ``nominalTime``, ``processing_engine``, ``errorMessage`` and ``tags`` on the run, ``jobType``,
  ``ownership`` and ``tags`` on the job, and the partition ``subset`` of an input or output dataset.

Only the partition form of a subset condition is described (the one our datasets use): a condition of
another form is refused rather than let through unchecked.
"""

from __future__ import annotations

from typing import Any

# The id the spec gives its own document. Our schema is registered under it, so that the facet files the
# Airflow provider ships, which extend the spec's ``RunFacet`` / ``JobFacet`` by this address, resolve.
SPEC_ID = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
STANDARD_FACETS_BASE = "https://openlineage.io/spec/facets/"

# The facet kinds of the core document, by the definition name a ``_schemaURL`` fragment uses.
CORE_FACETS = ("BaseFacet", "RunFacet", "JobFacet", "DatasetFacet", "InputDatasetFacet", "OutputDatasetFacet")


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/$defs/{name}"}


def _text(fmt: str | None = None) -> dict[str, Any]:
    return {"type": "string", "format": fmt} if fmt else {"type": "string"}


def _object(required: tuple[str, ...] = (), **fields: Any) -> dict[str, Any]:
    return {"type": "object", "properties": fields, "required": list(required)}


def _facets_of(kind: str) -> dict[str, Any]:
    """A name -> facet map whose every value is a facet of ``kind``."""
    return {"type": "object", "additionalProperties": _ref(kind)}


def _facet(kind: str, required: tuple[str, ...] = (), **fields: Any) -> dict[str, Any]:
    """A facet of ``kind`` (one of :data:`CORE_FACETS`) with these fields of its own."""
    return {"allOf": [_ref(kind), _object(required, **fields)]}


def _core() -> dict[str, Any]:
    facet_envelope = {
        "type": "object",
        "properties": {"_producer": _text("uri"), "_schemaURL": _text("uri")},
        "required": ["_producer", "_schemaURL"],
        "additionalProperties": True,
    }
    deletable = {"allOf": [_ref("BaseFacet"), _object(_deleted={"type": "boolean"})]}
    job_reference = _object(("namespace", "name"), namespace=_text(), name=_text(), facets=_facets_of("JobFacet"))
    run_reference = _object(("runId",), runId=_text("uuid"), facets=_facets_of("RunFacet"))
    return {
        "BaseFacet": facet_envelope,
        "RunFacet": {"allOf": [_ref("BaseFacet")]},
        "JobFacet": deletable,
        "DatasetFacet": deletable,
        "InputDatasetFacet": {"allOf": [_ref("BaseFacet")]},
        "OutputDatasetFacet": {"allOf": [_ref("BaseFacet")]},
        "Run": run_reference,
        "Job": job_reference,
        "Dataset": _object(("namespace", "name"), namespace=_text(), name=_text(),
                           facets=_facets_of("DatasetFacet")),
        "InputDataset": {"allOf": [_ref("Dataset"), _object(inputFacets=_facets_of("InputDatasetFacet"))]},
        "OutputDataset": {"allOf": [_ref("Dataset"), _object(outputFacets=_facets_of("OutputDatasetFacet"))]},
        "RunEvent": _object(
            ("eventTime", "producer", "schemaURL", "run", "job"),
            eventTime=_text("date-time"), producer=_text("uri"), schemaURL=_text("uri"),
            eventType={"type": "string", "enum": ["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"]},
            run=_ref("Run"), job=_ref("Job"),
            inputs={"type": "array", "items": _ref("InputDataset")},
            outputs={"type": "array", "items": _ref("OutputDataset")},
        ),
    }


def _partition_condition() -> dict[str, Any]:
    partition = _object(("dimensions",), identifier=_text(), dimensions={"type": "object"})
    return _object(("type", "partitions"), type={"enum": ["partition"]},
                   partitions={"type": "array", "items": partition})


def _standard_facets() -> dict[str, Any]:
    tag = _object(("key", "value"), key=_text(), value=_text(), source=_text())
    tags = {"type": "array", "items": tag}
    run = _object(("runId",), runId=_text("uuid"), facets=_facets_of("RunFacet"))
    job = _object(("namespace", "name"), namespace=_text(), name=_text(), facets=_facets_of("JobFacet"))
    return {
        "ParentRunFacet": _facet("RunFacet", ("run", "job"), run=run, job=job,
                                 root=_object(("run", "job"), run=run, job=job)),
        "NominalTimeRunFacet": _facet("RunFacet", ("nominalStartTime",), nominalStartTime=_text("date-time"),
                                      nominalEndTime=_text("date-time")),
        "ProcessingEngineRunFacet": _facet("RunFacet", ("version",), version=_text(), name=_text(),
                                           openlineageAdapterVersion=_text()),
        "ErrorMessageRunFacet": _facet("RunFacet", ("message", "programmingLanguage"), message=_text(),
                                       programmingLanguage=_text(), stackTrace=_text()),
        "TagsRunFacet": _facet("RunFacet", tags=tags),
        "JobTypeJobFacet": _facet("JobFacet", ("processingType", "integration"), processingType=_text(),
                                  integration=_text(), jobType=_text()),
        "OwnershipJobFacet": _facet("JobFacet", owners={"type": "array", "items": _object(
            ("name",), name=_text(), type=_text())}),
        "TagsJobFacet": _facet("JobFacet", tags=tags),
        "PartitionSubsetCondition": _partition_condition(),
        "InputSubsetInputDatasetFacet": _facet("InputDatasetFacet", ("inputCondition",),
                                               inputCondition=_ref("PartitionSubsetCondition")),
        "OutputSubsetOutputDatasetFacet": _facet("OutputDatasetFacet", ("outputCondition",),
                                                 outputCondition=_ref("PartitionSubsetCondition")),
    }


# Standard facet file (as a ``_schemaURL`` names it) -> the facet definitions it holds that we describe.
STANDARD_FACET_FILES: dict[str, tuple[str, ...]] = {
    "ParentRunFacet.json": ("ParentRunFacet",),
    "NominalTimeRunFacet.json": ("NominalTimeRunFacet",),
    "ProcessingEngineRunFacet.json": ("ProcessingEngineRunFacet",),
    "ErrorMessageRunFacet.json": ("ErrorMessageRunFacet",),
    "TagsRunFacet.json": ("TagsRunFacet",),
    "JobTypeJobFacet.json": ("JobTypeJobFacet",),
    "OwnershipJobFacet.json": ("OwnershipJobFacet",),
    "TagsJobFacet.json": ("TagsJobFacet",),
    "BaseSubsetDatasetFacet.json": ("InputSubsetInputDatasetFacet", "OutputSubsetOutputDatasetFacet"),
}


def event_schema() -> dict[str, Any]:
    """The whole schema: one document whose ``$defs`` hold the event, its parts and the facets."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SPEC_ID,
        "$defs": {**_core(), **_standard_facets()},
    }
