"""The Spark run's manifest as one record: what the job writes reads back whole, the vote carries the
summary, a plain vote is not a Spark run's, a malformed one is refused naming where it was."""

from __future__ import annotations

import json

import pytest

from airflow_epochs.coordination import CorruptPayload
from airflow_epochs.coordination.wire.manifests import (
    LineageRun,
    OutputFiles,
    RunManifest,
    manifest_totals,
    vote_lineage_run,
)
from airflow_epochs.spark.submit import vote_summary

RUN = RunManifest(
    5, 2, "r1", "/data/p/5/2/r1",
    {"data": OutputFiles("/data/p/5/2/r1/data", "parquet", 100, "c1", files=2, bytes=4096),
     "snapshot": OutputFiles("/data/p/5/2/r1/snapshot", "parquet", 7, "c2", files=1, bytes=100)},
    config_version=1, snapshot_from=4, seconds=1.25, pipeline="p", partition="a", producer="x", extra={"k": 1},
)


def test_the_manifest_the_job_writes_reads_back_whole():
    assert RunManifest.from_json(json.loads(json.dumps(RUN.to_json())), where="m") == RUN
    assert RUN.snapshot == RUN.outputs["snapshot"]


def test_the_vote_carries_the_summary_and_reads_back_as_the_run():
    summary = RUN.vote_summary()
    assert set(summary) == {"epoch", "attempt", "run", "location", "outputs", "config_version", "snapshot_from",
                            "seconds"}
    voted = RunManifest.from_vote(json.loads(json.dumps(summary)))
    assert voted is not None and (voted.epoch, voted.run, voted.outputs) == (5, "r1", RUN.outputs)
    assert vote_summary(RUN.to_json()) == summary  # the public function is the record's


def test_a_plain_vote_is_not_a_spark_run():
    assert RunManifest.from_vote({"rows": 42}) is None and RunManifest.from_vote("done") is None


def test_a_malformed_output_is_refused_naming_where():
    bad = {**RUN.vote_summary(), "outputs": {"data": {"rows": 1}}}
    with pytest.raises(CorruptPayload, match="the vote of 'x' output 'data'"):
        RunManifest.from_vote(bad, where="the vote of 'x'")
    with pytest.raises(CorruptPayload, match="attempt"):
        RunManifest.from_json({**RUN.vote_summary(), "attempt": "2"}, where="m")


def test_a_lineage_run_is_read_only_when_whole():
    from airflow_epochs.lineage.runs import LINEAGE_RUN

    assert LINEAGE_RUN == "lineage_run"  # the key the submitter writes is the one the record reads
    vote = {"rows": 1, "lineage_run": {"namespace": "n", "job": "j", "runId": "r"}}
    assert vote_lineage_run(vote) == LineageRun("n", "j", "r")
    assert vote_lineage_run({"lineage_run": {"namespace": "n"}}) is None


def test_totals_add_up_spark_outputs_without_the_snapshot_and_plain_rows():
    totals = manifest_totals([RUN.vote_summary(), {"rows": 5}, "not a map"])
    assert totals == {"rows": 105, "bytes": 4096, "files": 2, "seconds": 1.25}
