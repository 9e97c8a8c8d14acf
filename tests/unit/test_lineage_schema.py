"""The lineage tests' schema check (``openlineage_schema``) itself: an event built the way our
operators build theirs passes OpenLineage's published schemas (the 2-0-2 run event and its facets, vendored
in ``openlineage_spec``) and our facet's; each kind of malformation is refused (the event, a standard
facet, our facet, a facet of unknown schema)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone

import jsonschema
import pytest
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.serde import Serde
from openlineage_schema import validate_event

from airflow_epochs.lineage.facets import FACET_NAME, PRODUCER, EpochsRunFacet, input_datasets, output_dataset


def good_event() -> dict:
    facet = EpochsRunFacet(pipeline="p", epoch=3, partition="daily", attempt=7, producers=["a", "b"], sealed=True,
                           generation=0, sealRequest="ti-1", sealZxid=42, manifestDigests={"a": "0" * 64},
                           lineageVector={"raw": 3}, table="lake.daily", snapshotId=123,
                           producerRuns=[{"producer": "a", "namespace": "ns", "job": "dag.a",
                                          "runId": str(uuid.uuid4())}], producer=PRODUCER)
    event = RunEvent(eventType=RunState.COMPLETE, eventTime=datetime.now(timezone.utc).isoformat(),
                     run=Run(runId=str(uuid.uuid4()), facets={FACET_NAME: facet}),
                     job=Job(namespace="ns", name="dag.task"), producer=PRODUCER,
                     inputs=input_datasets({"raw": ("file", "/data/p/raw")}, 3),
                     outputs=[output_dataset("iceberg://cat", "lake.daily", 3)])
    return json.loads(json.dumps(Serde.to_dict(event)))


def test_a_well_formed_event_passes():
    event = good_event()
    assert event["run"]["facets"][FACET_NAME]["producerRuns"][0]["producer"] == "a"
    validate_event(event)


@pytest.mark.parametrize(("break_it", "message"), [
    (lambda e: e.update(eventType="DONE"), "DONE"),
    (lambda e: e["run"].update(runId="not-a-uuid"), "not-a-uuid"),
    (lambda e: e.pop("job"), "job"),
    (lambda e: e["outputs"][0].pop("namespace"), "namespace"),
    (lambda e: e["run"]["facets"][FACET_NAME].update(epoch=-1), "-1"),
    (lambda e: e["run"]["facets"][FACET_NAME].update(unknown=1), "unknown"),
    (lambda e: e["run"]["facets"][FACET_NAME]["producerRuns"][0].pop("runId"), "runId"),
    (lambda e: e["outputs"][0]["outputFacets"]["subset"]["outputCondition"].update(type="nothing"), "nothing"),
    (lambda e: e["inputs"][0]["inputFacets"]["subset"]["inputCondition"]["partitions"][0].pop("dimensions"),
     "inputCondition"),  # the published schema: no subset condition of the given ones fits
    (lambda e: e.update(eventTime="yesterday"), "yesterday"),
    (lambda e: e.update(producer="not a uri"), "not a uri"),
    (lambda e: e["run"]["facets"][FACET_NAME].pop("_producer"), r"\['facets'\]"),  # RunFacet needs _producer
    (lambda e: e["run"]["facets"][FACET_NAME].update(_schemaURL="https://example.invalid/Other.json"),
     "no known schema"),
], ids=["event type", "run id", "no job", "dataset namespace", "our epoch", "our extra field",
        "producer run id", "subset condition", "subset partition", "event time", "producer uri",
        "facet producer", "unknown facet schema"])
def test_a_malformed_event_is_refused(break_it, message):
    event = good_event()
    break_it(event)
    with pytest.raises(jsonschema.ValidationError, match=message):
        validate_event(event)
