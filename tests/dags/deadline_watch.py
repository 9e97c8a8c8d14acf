"""Two deadline watches of one partition (as two deployments would deploy them): partition ``daily``
of pipeline ``late`` at the run's ``epoch``; the late one's alert runs an Airflow ``AsyncCallback``
in the triggerer, once across both watches and both triggerers."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, AsyncCallback

from airflow_epochs.operators import WatchDeadlineOperator

# [START deadline_watch]
with DAG(dag_id="deadline_watch", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         params={"epoch": 1}, tags=["airflow-epochs", "test"]):
    for name in ("watch_a", "watch_b"):
        WatchDeadlineOperator(task_id=name, pipeline="late", partition="daily", epoch="{{ params.epoch }}",
                              callback=AsyncCallback("deadline_callbacks.hang_first_then_record"), retries=0)
# [END deadline_watch]
