"""OpenLineage events of a correction's re-runs (``airflow dags test`` of ``corrected_totals_fix`` with the
OpenLineage provider's file transport): the running-totals pipeline of the Spark tests sealed 5 epochs,
epoch 2's input arrives corrected, and the DAG run re-seals it; the re-producing task's COMPLETE event
carries our ``airflowEpochsCorrection`` run facet, naming the correction, the version asked for and every
version it sealed (2 to 5, each version 2), and its output is the partition with those epochs as its
subset. Every event is validated against OpenLineage's published schemas, the facet against the schema
the package ships."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from airflow_db import private_airflow_db
from openlineage_schema import validate_event
from spark_pipeline import EPOCHS, JOB, PARTITION, assert_matches_pandas, run_clean, sealed_result, write_inputs

from airflow_epochs.lineage.corrections import CORRECTION_FACET_NAME, correction_facet_schema
from airflow_epochs.spark import sealed_outputs

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


def test_the_reruns_of_a_correction_name_their_versions_in_valid_events(dagbag, airflow_home, zk_connection, zk,
                                                                        spark, spark_connect, tmp_path):
    assert "corrected_totals_fix" in dagbag.dags
    inputs = write_inputs(tmp_path / "in", EPOCHS)
    storage = tmp_path / "out"
    ledger = run_clean(zk, spark, storage, inputs, "corrected_totals")
    with open(f"{inputs[2]}/part-0.csv", "a", newline="") as out:  # the late rows of epoch 2
        csv.writer(out).writerows([["a", 1000], ["z", 7]])

    events_file = tmp_path / "openlineage.jsonl"
    env = {**os.environ, **private_airflow_db(airflow_home, tmp_path / "home"),
           "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events_file),
                                                          "append": True}),
           "AIRFLOW__OPENLINEAGE__NAMESPACE": "epochs-tests", "AIRFLOW__OPENLINEAGE__DISABLED": "False"}
    conf = {"epoch": 2, "job": str(JOB), "storage": str(storage), "inputs": str(Path(inputs[1]).parent),
            "reason": "late rows for epoch 2"}
    done = subprocess.run([str(Path(sys.executable).parent / "airflow"), "dags", "test", "corrected_totals_fix", "-c",
                           json.dumps(conf)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    assert [o.version for o in sealed_outputs(ledger, PARTITION, range(1, EPOCHS + 1))] == [1, 2, 2, 2, 2]
    daily, running, _ = sealed_result(spark, ledger, EPOCHS)
    assert_matches_pandas(daily, running, inputs, EPOCHS)  # pandas over the corrected input
    (correction,) = ledger.corrections.list()

    events = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
    jsonschema.Draft202012Validator.check_schema(correction_facet_schema())
    for event in events:
        validate_event(event)
    [complete] = [e for e in events if e["eventType"] == "COMPLETE" and e["job"]["name"].endswith(".reproduce")]
    facet = complete["run"]["facets"][CORRECTION_FACET_NAME]
    assert facet["pipeline"] == "corrected_totals" and facet["correction"] == correction.id
    assert (facet["state"], facet["reason"]) == ("done", "late rows for epoch 2")
    assert facet["origin"] == {"epoch": 2, "partition": PARTITION, "version": 2}
    assert facet["plan"] == [{"epoch": e, "partition": PARTITION} for e in range(3, EPOCHS + 1)]
    assert facet["resealed"] == [{"epoch": e, "partition": PARTITION, "version": 2} for e in range(2, EPOCHS + 1)]
    [output] = complete["outputs"]
    assert output["name"].endswith(f"/corrected_totals/{PARTITION}")
    partitions = output["outputFacets"]["subset"]["outputCondition"]["partitions"]
    assert [p["identifier"] for p in partitions] == [str(e) for e in range(2, EPOCHS + 1)]
    # The facet's schema is not vacuous: version 1 (the original seal) is no re-sealed version.
    broken = json.loads(json.dumps(complete))
    broken["run"]["facets"][CORRECTION_FACET_NAME]["resealed"][0]["version"] = 1
    with pytest.raises(jsonschema.ValidationError, match="minimum"):
        validate_event(broken)
