"""The epoch job contract on real PySpark and a real ZooKeeper: running totals over 5 epochs give the
same sealed result (equal to pandas on the raw inputs) with and without faults, and output is visible
only through seals.

(The server-free tests of integration/test_spark_contract.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from airflow_epochs.spark import (
    EpochContext,
)


def test_the_contract_imports_without_airflow(tmp_path):
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'airflow' or name.startswith('airflow.'):\n"
        "            raise ImportError('airflow is blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import airflow_epochs.spark as s\n"
        "ctx = s.EpochContext(pipeline='p', partition='q', producer='r', epoch=3, attempt=7, config_version=1,\n"
        "                     run='ab' * 8, storage='/tmp/x', inputs={'events': '/in'})\n"
        "print(s.EpochContext.from_argv(['--x', s.CONTEXT_ARG, ctx.to_json()]) == ctx)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


@pytest.mark.parametrize(("change", "message"), [
    ({"run": "../../etc"}, "run must be 8-32 lowercase hex"),
    ({"epoch": 0}, "epoch"),
    ({"partition": "a/b"}, "partition"),
    ({"inputs": {"events": ""}}, "inputs must map names to locations"),
    ({"snapshot": {"where": "x"}}, "snapshot must be None or a pointer"),
    ({"attempt": -1}, "attempt must be a non-negative integer"),
])
def test_bad_epoch_context_is_refused_by_name(change, message):
    from airflow_epochs.coordination import InvalidInput

    fields = dict(pipeline="p", partition="q", producer="r", epoch=1, attempt=1, config_version=1, run="ab" * 8,
                  storage="/tmp/x")
    with pytest.raises(InvalidInput, match=message):
        EpochContext(**{**fields, **change})
    with pytest.raises(InvalidInput, match="unknown fields"):
        EpochContext.from_json(json.dumps({**fields, "binary": "/bin/sh"}))


