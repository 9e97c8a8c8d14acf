"""The PySpark install is consistent (pyspark-client must not shadow pyspark) and a local session works."""

from __future__ import annotations

import pytest


@pytest.mark.integration
@pytest.mark.slow
def test_local_spark_session_runs_a_job(spark, tmp_path):
    frame = spark.range(1000).selectExpr("id", "id % 7 AS bucket")
    frame.write.parquet(str(tmp_path / "out"))
    back = spark.read.parquet(str(tmp_path / "out"))
    assert back.count() == 1000
    assert back.groupBy("bucket").count().count() == 7
