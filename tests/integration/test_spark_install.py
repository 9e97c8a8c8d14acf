"""The PySpark install is consistent (pyspark-client must not shadow pyspark) and a local session works."""

from __future__ import annotations

import re
from pathlib import Path

import pytest


def test_pyspark_python_files_match_the_jars():
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    core = [p.name for p in jars.glob("spark-core_*.jar")]
    assert core, f"no spark-core jar in {jars}"
    jar_version = re.search(r"spark-core_[\d.]+-(\d+\.\d+\.\d+)", core[0]).group(1)
    assert pyspark.__version__ == jar_version, (
        f"pyspark Python files say {pyspark.__version__} but the jars are {jar_version}: pyspark-client "
        "overwrote them; rerun scripts/bootstrap.sh or 'pip install --force-reinstall --no-deps pyspark'"
    )


@pytest.mark.integration
@pytest.mark.slow
def test_local_spark_session_runs_a_job(spark, tmp_path):
    frame = spark.range(1000).selectExpr("id", "id % 7 AS bucket")
    frame.write.parquet(str(tmp_path / "out"))
    back = spark.read.parquet(str(tmp_path / "out"))
    assert back.count() == 1000
    assert back.groupBy("bucket").count().count() == 7
