"""The declared-producers benchmark's ``two_assets_one_key`` case (apache/airflow#71070): two producer
DAGs, each updating its own asset, finish for the same partition key at the same instant, and a consumer
waits for both. Both mechanisms watch the same two producers in the same run: ours (partition ``pair`` of
pipeline ``pair``, its gate asset) and the peer (``PartitionedAssetTimetable`` on the two assets, as
Airflow's docs configure it, no provider code).

Each producer run sleeps until the wall-clock second given in its conf (``at``) and then records its
event, so that the two events of one key reach Airflow together: the case the issue reports, where each
event locks only its own asset's row while looking for the consumer's pending run of the key.
"""

from __future__ import annotations

import time

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Asset, PartitionedAssetTimetable

from airflow_epochs.operators.declared import ReceiveDeclaredKeyOperator, declared_gate_asset

PAIR_A = Asset(name="pair_a", uri="file:///data/pair/a")
PAIR_B = Asset(name="pair_b", uri="file:///data/pair/b")
START = pendulum.datetime(2026, 1, 1, tz="UTC")


def produce(asset: Asset):
    def load(outlet_events, dag_run) -> str:
        key = dag_run.conf["key"]
        time.sleep(max(0.0, float(dag_run.conf["at"]) - time.time()))  # both producers of the key at once
        outlet_events[asset].add_partitions(key)
        return key

    return load


for dag_id, asset in (("prod_pair_a", PAIR_A), ("prod_pair_b", PAIR_B)):
    with DAG(dag_id=dag_id, schedule=None, start_date=START, catchup=False, tags=["bench"]):
        PythonOperator(task_id="load", python_callable=produce(asset), outlets=[asset])


def receive_key(dag_run) -> str:
    return str(dag_run.partition_key)


with DAG(dag_id="pair_report_peer", schedule=PartitionedAssetTimetable(assets=PAIR_A & PAIR_B),
         start_date=START, catchup=False, tags=["bench"]):
    PythonOperator(task_id="receive", python_callable=receive_key)

with DAG(dag_id="pair_report", schedule=[declared_gate_asset("pair", "pair", consumer="pair_report", scope="bench")],
         start_date=START, catchup=False, tags=["bench"]):
    ReceiveDeclaredKeyOperator(task_id="receive", pipeline="pair", partition="pair", consumer="pair_report")
