"""A sensor that runs out of time says what it was waiting for: partition, pipeline and epoch."""

from __future__ import annotations

import re

import pytest
from airflow.sdk.exceptions import AirflowSensorTimeout, AirflowSkipException

from airflow_epochs.sensors import BarrierSensor, FrontierSensor, SealedPartitionSensor


@pytest.mark.parametrize(("sensor", "words"), [
    (SealedPartitionSensor(task_id="s", pipeline="p", partitions=["a", "b"], epoch=7, timeout=60),
     "partition(s) a, b of pipeline 'p' to be sealed at epoch 7"),
    (FrontierSensor(task_id="f", pipeline="p", epoch=9, timeout=60), "the frontier of pipeline 'p' to reach epoch 9"),
    (BarrierSensor(task_id="b", pipeline="p", epoch=3, barrier="ingested", timeout=60),
     "barrier 'ingested' of pipeline 'p' at epoch 3 to be released"),
])
def test_deferral_timeout_is_reported_with_what_was_awaited(sensor, words):
    """The task runner resumes a timed-out deferral with next_method "__fail__"; our sensors turn
    Airflow's generic message into one that names what never came (and soft_fail still skips)."""
    from airflow.sdk.bases.operator import TriggerFailureReason

    with pytest.raises(AirflowSensorTimeout, match=re.escape(f"timed out after 60 s waiting for {words}")):
        sensor.resume_execution("__fail__", {"error": TriggerFailureReason.TRIGGER_TIMEOUT}, context={})
    sensor.soft_fail = True
    with pytest.raises(AirflowSkipException):
        sensor.resume_execution("__fail__", {"error": TriggerFailureReason.TRIGGER_TIMEOUT}, context={})


