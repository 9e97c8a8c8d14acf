"""OpenLineage events of a real DAG run (``airflow dags test`` with the OpenLineage provider's file
transport): the Spark epoch task's output is the published Iceberg table with the epoch as a partition
subset, its run carries our ``airflowEpochs`` facet, which names the producers' runs; every event is
validated with ``jsonschema`` against OpenLineage's published schemas (vendored in ``openlineage_spec``)
and each facet against its own schema (ours: the one the package ships)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from airflow_db import private_airflow_db
from openlineage_schema import validate_event
from spark_pipeline import JOB, expected, write_inputs

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.lineage.facets import FACET_NAME, manifest_digest, run_facet_schema
from airflow_epochs.tables import catalog_settings, load_catalog, table_as_of_epoch
from airflow_epochs.tables import history as h

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]
TABLE = "epochs.totals"


def _catalog_extra(tmp_path: Path) -> dict[str, str]:
    return {"catalog": "sql", "sqlite": str(tmp_path / "catalog.db"), "warehouse": (tmp_path / "warehouse").as_uri(),
            "name": "lineage_test"}


def _lineage_env(airflow_home: Path, tmp_path: Path, events_file: Path) -> dict[str, str]:
    """A private metadata database, local Spark, a SQLite Iceberg catalog in ``tmp_path``, and OpenLineage
    events appended to ``events_file``."""
    return {
        **os.environ, **private_airflow_db(airflow_home, tmp_path / "home"),
        "AIRFLOW_CONN_SPARK_LOCAL": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW_CONN_ICEBERG_TEST": json.dumps({"conn_type": "iceberg", "extra": _catalog_extra(tmp_path)}),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events_file),
                                                       "append": True}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "epochs-tests",
        "AIRFLOW__OPENLINEAGE__DISABLED": "False",
    }


def test_dag_run_emits_valid_events_with_our_facet_and_the_published_table(dagbag, airflow_home, zk_connection, zk,
                                                                             tmp_path):
    assert "published_totals" in dagbag.dags
    inputs = write_inputs(tmp_path / "in", 2)
    events_file = tmp_path / "openlineage.jsonl"
    env = _lineage_env(airflow_home, tmp_path, events_file)
    airflow = str(Path(sys.executable).parent / "airflow")
    for epoch in (1, 2):
        conf = {"epoch": epoch, "job": str(JOB), "storage": str(tmp_path / "out"),
                "inputs": str(Path(inputs[1]).parent)}
        done = subprocess.run([airflow, "dags", "test", "published_totals", "-c", json.dumps(conf)], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    # The table: exactly one snapshot per sealed epoch although two tasks published each epoch.
    catalog = load_catalog(catalog_settings(extra=_catalog_extra(tmp_path)))
    ledger = EpochLedger(zk, "published_totals")
    table = catalog.load_table(TABLE)
    records = [h.published(s) for s in table.snapshots()]
    assert [(r.action, r.epoch) for r in records if r] == [("publish", 1), ("publish", 2)]
    want, _ = expected(inputs, 2)
    got = table_as_of_epoch(catalog, TABLE, 2).to_pandas().sort_values(["epoch", "key"]).reset_index(drop=True)
    assert got[["epoch", "key", "events", "amount"]].astype("int64", errors="ignore").values.tolist() == \
        want[["epoch", "key", "events", "amount"]].values.tolist()

    events = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
    assert events, "no OpenLineage event was written"
    jsonschema.Draft202012Validator.check_schema(run_facet_schema())
    for event in events:
        validate_event(event)  # the event against the 2-0-2 run event, each facet against its schema
    # The validation is not vacuous: the same event, malformed, is refused.
    broken = json.loads(json.dumps(events[-1]))
    del broken["run"]["runId"]
    with pytest.raises(jsonschema.ValidationError, match="runId"):
        validate_event(broken)
    completes = {}
    for event in events:
        facet = event["run"].get("facets", {}).get(FACET_NAME)
        if event["eventType"] == "COMPLETE" and event["job"]["name"].endswith(("epoch.totals", "epoch.publish")):
            assert facet is not None, event["job"]["name"]
            completes[(event["job"]["name"].rsplit(".", 1)[-1], facet["epoch"])] = (event, facet)
    assert set(completes) == {("totals", 1), ("totals", 2), ("publish", 1), ("publish", 2)}
    for epoch in (1, 2):
        event, facet = completes[("totals", epoch)]
        seal = ledger.seal(epoch, "totals")
        record = ledger.seal_record(epoch, "totals")
        assert facet["sealed"] and facet["pipeline"] == "published_totals" and facet["partition"] == "totals"
        assert (facet["attempt"], facet["generation"], facet["sealRequest"], facet["sealZxid"]) == \
            (seal.attempt, seal.generation, record.request, seal.zxid)
        assert facet["producers"] == ["job"]
        # The seal links the producers' runs: the run that voted is the Spark task's own run.
        assert facet["producerRuns"] == [{"producer": "job", "namespace": "epochs-tests",
                                          "job": event["job"]["name"], "runId": event["run"]["runId"]}]
        assert seal.manifests["job"]["lineage_run"]["runId"] == event["run"]["runId"]
        assert facet["manifestDigests"] == {"job": manifest_digest(seal.manifests["job"])}
        assert facet["table"] == TABLE
        assert facet["snapshotId"] == next(r.snapshot_id for r in records if r and r.epoch == epoch)
        [output] = event["outputs"]
        assert (output["namespace"], output["name"]) == ("iceberg://lineage_test", TABLE)
        partitions = output["outputFacets"]["subset"]["outputCondition"]["partitions"]
        assert partitions == [{"dimensions": {"epoch": str(epoch)}, "identifier": str(epoch)}]
        # The publish task's COMPLETE names the same snapshot (it found the one the Spark task made).
        assert completes[("publish", epoch)][1]["snapshotId"] == facet["snapshotId"]
        # ...and its facet links the same producer run: the picture does not depend on who reports it.
        assert completes[("publish", epoch)][1]["producerRuns"] == facet["producerRuns"]


READER = JOB.parent / "sealed_reader.py"


def test_a_partition_is_one_dataset_whichever_task_names_it(dagbag, airflow_home, zk_connection, zk, tmp_path):
    """``totals`` sealed and published by its producer, read by ``report`` (``sealed_inputs``), published
    again by a PublishSealedOperator: the producer's output, the reader's input and the publish task's
    input and output are one dataset (namespace and name), and every event is valid against
    OpenLineage's published schemas."""
    assert "lineage_connected" in dagbag.dags
    inputs = write_inputs(tmp_path / "in", 1)
    events_file = tmp_path / "openlineage.jsonl"
    env = _lineage_env(airflow_home, tmp_path, events_file)
    storage = tmp_path / "out"
    conf = {"epoch": 1, "job": str(JOB), "reader": str(READER), "storage": str(storage),
            "inputs": str(Path(inputs[1]).parent)}
    done = subprocess.run([str(Path(sys.executable).parent / "airflow"), "dags", "test", "lineage_connected", "-c",
                           json.dumps(conf)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]

    events = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
    for event in events:
        validate_event(event)
    completes = {event["job"]["name"].rsplit(".", 1)[-1]: event for event in events
                 if event["eventType"] == "COMPLETE" and event["job"]["name"].endswith(("totals", "report", "publish"))}
    assert set(completes) == {"totals", "report", "publish"}

    def ids(event, kind):
        return [(d["namespace"], d["name"]) for d in event.get(kind) or []]

    table = ("iceberg://lineage_test", TABLE)
    assert ids(completes["totals"], "outputs") == [table]
    assert ids(completes["report"], "inputs") == [table]  # the reader names the partition as its producer does
    assert ids(completes["publish"], "inputs") == [table] and ids(completes["publish"], "outputs") == [table]
    assert ids(completes["report"], "outputs") == [("file", f"{storage}/lineage_connected/report")]
    for kind, facet in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        for name in ("report", "publish"):
            for dataset in completes[name][kind]:
                condition = dataset[facet]["subset"]["inputCondition" if kind == "inputs" else "outputCondition"]
                assert condition["partitions"] == [{"dimensions": {"epoch": "1"}, "identifier": "1"}]
    # the name comes from the seal: the producer voted it with its manifest
    seal = EpochLedger(zk, "lineage_connected").seal(1, "totals")
    assert seal.manifests["job"]["lineage_dataset"] == {"namespace": table[0], "name": table[1]}
