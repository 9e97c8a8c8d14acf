"""The PySpark install is consistent: pyspark-client must not shadow pyspark's Python files."""

from __future__ import annotations

import re
from pathlib import Path


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


