"""A sensor that runs out of time says what it was waiting for: partition, pipeline and epoch."""

from __future__ import annotations

import pytest

from airflow_epochs.coordination import EpochLedger, PipelineConfig

pytestmark = pytest.mark.integration


def test_poke_mode_timeout_names_partition_and_epoch(dagbag, zk_connection, zk, capfd):
    EpochLedger(zk, "late", owner="t").create_pipeline(PipelineConfig({"daily": ("join",)}))
    dag = dagbag.get_dag("sensor_timeout_poke")
    run = dag.test()
    assert "failed" in str(run.state)
    out = capfd.readouterr()
    assert ("wait: timed out after 2 s waiting for partition(s) daily of pipeline 'late' to be sealed at epoch 4"
            in out.out + out.err)


