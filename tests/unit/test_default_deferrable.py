"""``deferrable`` defaults to Airflow's ``[operators] default_deferrable`` for every deferrable
operator and sensor of the provider, as for Airflow's own; an explicit argument wins."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json
from airflow_epochs.operators import ArriveAtBarrierOperator, OpenEpochOperator
from airflow_epochs.sensors import BarrierSensor, FrontierSensor, SealedPartitionSensor

tasks = [
    OpenEpochOperator(task_id="open", pipeline="p", epoch=1),
    ArriveAtBarrierOperator(task_id="arrive", barrier="b", participant="a", attempt_task_id="open"),
    BarrierSensor(task_id="barrier", barrier="b", pipeline="p", epoch=1),
    FrontierSensor(task_id="frontier", pipeline="p", epoch=1),
    SealedPartitionSensor(task_id="sealed", pipeline="p", partitions="a", epoch=1),
]
explicit = [OpenEpochOperator(task_id="open2", pipeline="p", epoch=1, deferrable=not tasks[0].deferrable),
            FrontierSensor(task_id="frontier2", pipeline="p", epoch=1, deferrable=not tasks[3].deferrable)]
print(json.dumps({"default": {t.task_id: t.deferrable for t in tasks},
                  "explicit": {t.task_id: t.deferrable for t in explicit}}))
"""


def _defaults(setting: str | None, tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE"}
    env["AIRFLOW_HOME"] = str(tmp_path)  # no airflow.cfg there: only the environment and Airflow's defaults
    if setting is not None:
        env["AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE"] = setting
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("setting", "expected"), [(None, False), ("True", True), ("False", False)])
def test_deferrable_follows_airflows_default_deferrable(setting, expected, tmp_path):
    found = _defaults(setting, tmp_path)
    assert found["default"] == dict.fromkeys(["open", "arrive", "barrier", "frontier", "sealed"], expected)
    assert found["explicit"] == {"open2": not expected, "frontier2": not expected}
