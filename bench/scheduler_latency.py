"""2. Seal -> downstream task running, under a real Airflow scheduler and triggerer (not dags test).

Airflow runs on PostgreSQL with its API server, scheduler, triggerer and DAG processor, all started
here on loopback (see tests/helpers/airflow_stack.py) and stopped at the end. For each sample, the three
consumers of bench/dags/latency.py wait, then ``lat_upstream`` seals the partition; the measure is
from the seal (its time in ZooKeeper) to the start of each consumer's ``mark`` task (its start time
in Airflow's database). Ours: the deferrable SealedPartitionSensor, and the partitioned-asset
schedule; peer: ExternalTaskSensor in its defaults (poke mode, every 60 s).

    python bench/scheduler_latency.py [--smoke]      # alone; bench/run.py includes it
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from common import compare
from kazoo.client import KazooClient

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "helpers"))
from airflow_stack import AirflowStack  # noqa: E402


def _mark_start(stack: AirflowStack, dag_id: str, run_id: str | None = None,
                partition_key: str | None = None) -> float | None:
    if partition_key is not None:
        rows = stack.query("SELECT extract(epoch FROM ti.start_date) FROM task_instance ti JOIN dag_run r ON "
                           "r.dag_id = ti.dag_id AND r.run_id = ti.run_id WHERE ti.dag_id = %s AND "
                           "ti.task_id = 'mark' AND r.partition_key = %s", dag_id, partition_key)
    else:
        rows = stack.query("SELECT extract(epoch FROM start_date) FROM task_instance WHERE dag_id = %s AND "
                           "task_id = 'mark' AND run_id = %s", dag_id, run_id)
    return float(rows[0][0]) if rows and rows[0][0] is not None else None


def _trigger(stack: AirflowStack, *args: str) -> None:
    done = stack.airflow("dags", "trigger", *args)
    if done.returncode:
        raise RuntimeError(f"airflow dags trigger {' '.join(args)}: {done.stderr[-2000:]}")


def measure(hosts: str, samples: int, smoke: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="epochs-bench-sched-") as tmp:
        env = {"AIRFLOW_CONN_ZOOKEEPER_DEFAULT": json.dumps({"conn_type": "zookeeper", "host": hosts})}
        if smoke:
            env["LAT_EXTERNAL_POKE"] = "5"
        stack = AirflowStack(Path(tmp), env=env)
        zk = KazooClient(hosts=hosts)
        zk.start(timeout=30)
        try:
            stack.start([HERE / "dags" / "latency.py"])
            dags = ["lat_upstream", "lat_sensor", "lat_asset", "lat_external"]
            stack.wait_for_dags(dags)
            for dag_id in dags:
                stack.airflow("dags", "unpause", dag_id)
            ledger = EpochLedger(zk, "lat")
            found: dict[str, list[float]] = {"sensor": [], "asset": [], "external": []}
            # after the DAGs start_date (or their tasks never run) and in the past (or the run never starts)
            base = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
            for epoch in range(1, samples + 1):
                logical = (base + datetime.timedelta(days=epoch)).isoformat()
                conf = json.dumps({"epoch": epoch})
                _trigger(stack, "lat_sensor", "-r", f"sensor-{epoch}", "-c", conf)
                _trigger(stack, "lat_external", "-r", f"external-{epoch}", "-l", logical)
                time.sleep(15)  # both consumers are waiting (deferred / poking) before the seal
                _trigger(stack, "lat_upstream", "-r", f"upstream-{epoch}", "-l", logical, "-c", conf)
                deadline = time.monotonic() + 300
                starts: dict[str, float | None] = {}
                while time.monotonic() < deadline:
                    starts = {"sensor": _mark_start(stack, "lat_sensor", f"sensor-{epoch}"),
                              "asset": _mark_start(stack, "lat_asset", partition_key=str(epoch)),
                              "external": _mark_start(stack, "lat_external", f"external-{epoch}")}
                    if all(v is not None for v in starts.values()):
                        break
                    time.sleep(2)
                seal = ledger.seal(epoch, "daily")
                if seal is None or not all(v is not None for v in starts.values()):
                    raise RuntimeError(f"sample {epoch}: seal {seal}, starts {starts}; runs "
                                       f"{[stack.runs(d) for d in dags]}\n{stack.log_tail('scheduler')}")
                for name, started in starts.items():
                    found[name].append(float(started or 0) - seal.sealed_at)
                print(f"  sample {epoch}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in found.items()), flush=True)
        finally:
            stack.stop()
            zk.stop()
            zk.close()
    poke = "5 s (smoke)" if smoke else "default 60 s"
    compare("scheduler_sensor_s", "scheduler", "seal -> downstream task running, deferrable sensor (median)",
            found["sensor"], found["external"], "s", f"ExternalTaskSensor, poke {poke}",
            note=f"{samples} samples; real scheduler + triggerer on PostgreSQL")
    compare("scheduler_asset_s", "scheduler", "seal -> downstream task running, partitioned asset (median)",
            found["asset"], found["external"], "s", f"ExternalTaskSensor, poke {poke}", note=f"{samples} samples")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one sample, ExternalTaskSensor poking every 5 s")
    args = parser.parse_args()

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with EmbeddedZooKeeper() as server:
        measure(server.hosts, 1 if args.smoke else 3, args.smoke)
    return 0


if __name__ == "__main__":
    sys.exit(main())
