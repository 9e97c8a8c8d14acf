"""An EpochGroup with its stages inside its own tasks (``inline_stages=True``), in TaskFlow style: two
producers of ``orders`` arrive at barrier ``loaded``; ``report`` waits for it and closes the epoch. Run by
``tests/system/test_inline_stages.py`` (dag.test) and beside its stage-task twin."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, task

from airflow_epochs.operators import EpochGroup

for inline in (True, False):
    with DAG(dag_id=f"taskflow_{'inline' if inline else 'stages'}", schedule=None,
             start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False, params={"epoch": 1},
             tags=["airflow-epochs", "test"]), \
            EpochGroup("epoch", pipeline=f"tf_{'inline' if inline else 'stages'}", inline_stages=inline,
                       open_kwargs={"epoch": "{{ params.epoch }}"}) as epoch:

        @task.epoch_producer(partition="orders")
        def orders_eu(params=None) -> dict:
            return {"rows": 10 * int(params["epoch"])}

        @task.epoch_producer(partition="orders")
        def orders_us(params=None) -> dict:
            return {"rows": 20 * int(params["epoch"])}

        @task.epoch_producer(partition="report")
        def report(eu: dict, us: dict) -> dict:
            return {"rows": eu["rows"] + us["rows"]}

        eu, us = orders_eu(), orders_us()
        epoch.barrier("loaded", [eu, us]) >> report(eu, us)
