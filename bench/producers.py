"""Declared producers vs Airflow's own partitioned-asset scheduling, under real schedulers, per scenario.

One Airflow deployment on PostgreSQL (tests/helpers/airflow_stack.py) runs every scenario; in each, two
consumers watch the same producer DAGs in the same run: ours (a declared partition's gate,
tests/dags/declared_consumer.py and bench/dags/producers_pair.py) and the peer
(``PartitionedAssetTimetable`` on the same assets, configured as Airflow's docs say, no provider code:
bench/dags/producers_peer.py and bench/dags/producers_pair.py). Scenarios, in this order:

- ``plain``: one scheduler, one triggerer; the three plain producer DAGs of
  tests/dags/declared_producers.py over several keys, key after key (a key's three producers started
  together, the next key once both consumers ran for it);
- ``two_assets_one_key`` (apache/airflow#71070): two producer DAGs of two assets finish for the same key
  at the same instant (bench/dags/producers_pair.py), key after key;
- ``rerun_after_consumption``: once ``plain``'s keys were consumed, the first key's three producer tasks
  are cleared (``clearTaskInstances``, what ``airflow tasks clear`` does) and run again, and a new DAG run
  of one producer is made for the second key: the data did not change, a user expects no consumer run
  (ours: the re-runs are reported and, with ``reopen_on_rerun`` off, the default, change nothing);
- ``two_schedulers``: a second scheduler and a second triggerer join; the plain producers over further
  keys (key after key), then one key that only one producer completes.

Rows per scenario (ids end in ``[scenario]``): ``producers_duplicate_runs`` (consumer runs beyond one per
complete key, plus any for the incomplete key; for the re-run, the runs it added),
``producers_missed_keys`` (complete keys with no run), ``producers_latency_s`` (a key's last producer
success to its consumer's first task running, median over keys) and its stages
``producers_latency_{event,queue,start}_s``; ours' ``producers_seal_to_event_s`` splits into
``producers_seal_to_yield_s`` (the watcher) and ``producers_yield_to_event_s`` (the triggerer's hand-over, from
its ``Trigger fired event`` log lines).

    python bench/producers.py [--smoke]      # alone; bench/run.py --only producers includes it
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from kazoo.client import KazooClient
from producers_rows import Side, Snapshot, report, report_rerun, snapshot

from airflow_epochs.coordination import EpochCalendar, EpochLedger
from airflow_epochs.coordination.wire.declared import CalendarKeys, DeclaredProducers, TaskProducer
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests" / "helpers"))
from airflow_stack import AirflowStack  # noqa: E402
from declared_sales import DAY1, DECLARED  # noqa: E402

SALES = Side("sales_report", "sales_report_peer", ("prod_eu", "prod_us", "prod_returns"), "declared")
PAIR = Side("pair_report", "pair_report_peer", ("prod_pair_a", "prod_pair_b"), "pair")
PAIR_DECLARED = DeclaredProducers(
    {"pair": (TaskProducer("prod_pair_a", "load", name="a"), TaskProducer("prod_pair_b", "load", name="b"))},
    CalendarKeys(EpochCalendar(DAY1, timedelta(days=1))))


def _day(n: int) -> str:
    return f"2026-01-{n:02d}"


def _wait(done: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(3)
    return done()


def _consumed(stack: AirflowStack, side: Side, keys: list[str], consumers: tuple[str, ...]) -> bool:
    from producers_rows import consumer_starts

    starts = consumer_starts(stack, side)
    return all(key in starts[consumer] for consumer in consumers for key in keys)


def _producers_ended(stack: AirflowStack, runs: dict[tuple[str, str], str], tries: int) -> bool:
    """Every producer run in ``runs`` has its task successful at try ``tries`` or later."""
    for (dag_id, _key), run_id in runs.items():
        rows = stack.query("SELECT state, try_number FROM task_instance WHERE dag_id = %s AND run_id = %s",
                           dag_id, run_id)
        if not rows or rows[0][0] != "success" or int(rows[0][1]) < tries:  # type: ignore[call-overload]
            return False
    return True


def _watching(stack: AirflowStack) -> int:
    """How many of the declared gates' asset watchers a triggerer has taken."""
    rows = stack.query("SELECT count(*) FROM trigger WHERE classpath LIKE %s AND triggerer_id IS NOT NULL",
                       "%DeclaredKeyEventTrigger")
    return int(rows[0][0])  # type: ignore[call-overload]


def _keys_one_by_one(stack: AirflowStack, side: Side, keys: list[str], wait: float) -> dict[tuple[str, str], str]:
    """Each key's producers started together, the next key once both consumers ran for it (or the peer did
    not within 30 s of ours): a key's latency is its own, not the queue of keys before it. The run ids."""
    runs: dict[tuple[str, str], str] = {}
    for key in keys:
        runs.update({(dag_id, key): stack.trigger(dag_id, {"key": key}) for dag_id in side.producers})
        _wait(lambda: _consumed(stack, side, [key], (side.ours,)), wait)  # noqa: B023 - used at once
        _wait(lambda: _consumed(stack, side, [key], (side.peer,)), 30)  # noqa: B023 - a stuck key stays stuck
    return runs


def _pair_spread(stack: AirflowStack, keys: list[str]) -> list[float]:
    """Per key, how far apart the two pair producers' successes were (seconds): the race needs ~0."""
    spread = []
    for key in keys:
        ends = [float(e) for (e,) in stack.query(  # type: ignore[arg-type]
            "SELECT extract(epoch FROM ti.end_date) FROM task_instance ti JOIN dag_run r ON r.dag_id = ti.dag_id AND "
            "r.run_id = ti.run_id WHERE ti.dag_id IN %s AND r.conf::text LIKE %s", PAIR.producers, f'%"{key}"%')]
        if len(ends) == 2:
            spread.append(abs(ends[0] - ends[1]))
    return spread


def measure(hosts: str, keys: int, smoke: bool) -> None:
    plain = [_day(n) for n in range(1, keys + 1)]
    later = [_day(n) for n in range(keys + 1, 2 * keys + 1)]
    incomplete = _day(2 * keys + 1)
    pair = [_day(n) for n in range(1, (3 if smoke else 6) + 1)]
    wait = 600 if smoke else 1200
    with tempfile.TemporaryDirectory(prefix="epochs-bench-producers-") as tmp:
        zk = KazooClient(hosts=hosts)
        zk.start(timeout=30)
        env = {"AIRFLOW_CONN_ZOOKEEPER_DEFAULT": json.dumps({"conn_type": "zookeeper", "host": hosts}),
               "AIRFLOW__EPOCHS__DECLARED_PIPELINES": "declared,pair"}
        stack = AirflowStack(Path(tmp), env=env)
        try:
            EpochLedger(zk, "declared", owner="bench").create_pipeline(DECLARED.pipeline_config())
            EpochLedger(zk, "pair", owner="bench").create_pipeline(PAIR_DECLARED.pipeline_config())
            stack.start([REPO / "tests" / "dags" / "declared_producers.py",
                         REPO / "tests" / "dags" / "declared_consumer.py", HERE / "dags" / "producers_peer.py",
                         HERE / "dags" / "producers_pair.py"])
            dags = [SALES.ours, SALES.peer, *SALES.producers, PAIR.ours, PAIR.peer, *PAIR.producers]
            stack.wait_for_dags(dags)
            for dag_id in dags:
                stack.unpause(dag_id)

            _wait(lambda: _watching(stack) >= 2, 180)  # both gates' watchers run in a triggerer
            time.sleep(5)  # and have opened their streams

            # plain: one scheduler, one triggerer; key after key, its three producers started together
            runs = _keys_one_by_one(stack, SALES, plain, wait)
            # two_assets_one_key: key after key, both producers released at the same wall-clock second
            for key in pair:
                at = time.time() + 15
                pair_runs = {(dag_id, key): stack.trigger(dag_id, {"key": key, "at": at}) for dag_id in PAIR.producers}
                _wait(lambda: _producers_ended(stack, pair_runs, 1), 300)  # noqa: B023 - used at once
            _wait(lambda: _consumed(stack, PAIR, pair, (PAIR.ours,)), wait)
            _wait(lambda: _consumed(stack, PAIR, pair, (PAIR.peer,)), 45)  # a stuck peer key stays stuck
            before: dict[str, Snapshot] = {"plain": snapshot(stack, zk, SALES), "pair": snapshot(stack, zk, PAIR)}
            spread = _pair_spread(stack, pair)

            # rerun_after_consumption: clear key 1's three producer tasks; a new run of one producer for key 2
            for dag_id in SALES.producers:
                stack.api("POST", f"dags/{dag_id}/clearTaskInstances",
                          {"dry_run": False, "dag_run_id": runs[(dag_id, plain[0])], "task_ids": ["load"],
                           "only_failed": False})
            rerun = {(dag_id, plain[0]): runs[(dag_id, plain[0])] for dag_id in SALES.producers}
            again = {("prod_us", plain[1]): stack.trigger("prod_us", {"key": plain[1]})}
            _wait(lambda: _producers_ended(stack, rerun, 2) and _producers_ended(stack, again, 1), wait)
            time.sleep(45 if smoke else 90)  # room for what the re-runs start
            after_rerun = snapshot(stack, zk, SALES)

            # two_schedulers: a second scheduler and triggerer on the same metadata database
            stack.spawn("scheduler-2", ["scheduler"])
            stack.spawn("triggerer-2", ["triggerer"])
            time.sleep(10)
            _keys_one_by_one(stack, SALES, later, wait)
            stack.trigger("prod_eu", {"key": incomplete})
            time.sleep(30 if smoke else 60)  # room for late duplicates
            last = snapshot(stack, zk, SALES)
        finally:
            stack.stop()
            zk.stop()
            zk.close()
    report("plain", SALES, before["plain"], plain, [], f"{keys} keys x 3 plain producers; 1 scheduler, 1 triggerer, "
           "PostgreSQL")
    report("two_assets_one_key", PAIR, before["pair"], pair, [],
           f"{len(pair)} keys x 2 producers of 2 assets released together (successes "
           f"{statistics.median(spread) if spread else float('nan'):.3f} s apart, median); apache/airflow#71070")
    report_rerun("rerun_after_consumption", SALES, before["plain"], after_rerun, plain[:2],
                 f"key {plain[0]}: its 3 producer tasks cleared and run again; key {plain[1]}: a new run of prod_us; "
                 "data unchanged; ours with reopen_on_rerun off (the default)")
    report("two_schedulers", SALES, last, later, [incomplete], f"{keys} keys x 3 plain producers + 1 key only "
           "prod_eu completes; 2 schedulers, 2 triggerers, PostgreSQL")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="two keys a scenario (three for two_assets_one_key)")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with EmbeddedZooKeeper() as server:
        measure(server.hosts, 2 if args.smoke else 3, args.smoke)
    return 0


if __name__ == "__main__":
    sys.exit(main())
