"""Run inside the Dagster venv (``DAGSTER_HOME`` set, its daemon running): launch an asset backfill of
days 1..N of every asset of ``definitions.py`` and wait for it, then write what the instance recorded.

    python backfill.py DAYS OUT.json [--partitions 2013-01-08] [--timeout S]

The backfill is added to the instance as the webserver's "Materialize all partitions" does
(``PartitionBackfill.from_asset_partitions`` + ``instance.add_backfill``); Dagster's own daemon (its
backfill and run-queue loops) then launches the runs, each a process of the default run launcher.
OUT.json: the backfill's status and, for every run it made, its partition, status and the step events
(start, success, failure) and materialisations with their timestamps.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("days", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--partitions", default="", help="comma-separated partition keys (default: every day)")
    parser.add_argument("--assets", default="", help="comma-separated asset keys (default: every asset)")
    parser.add_argument("--subset", default="", help='JSON {"asset": ["first day", "last day"], ...}: a range of '
                        "partitions per asset (what the UI's backfill of a partition and its downstream selects)")
    parser.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args()

    from dagster import AssetKey, DagsterInstance
    from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
    from dagster._core.storage.dagster_run import RunsFilter
    from dagster._core.utils import make_new_backfill_id
    from definitions import FIRST, defs

    instance = DagsterInstance.get()
    graph = defs.resolve_asset_graph()
    keys = [AssetKey(k) for k in args.assets.split(",") if k] or sorted(graph.materializable_asset_keys)
    partitions = [p for p in args.partitions.split(",") if p] or \
        [(FIRST + datetime.timedelta(days=d)).isoformat() for d in range(args.days)]
    backfill_id = make_new_backfill_id()
    started = time.time()
    if args.subset:
        from dagster._core.definitions.selector import (
            PartitionRangeSelector,
            PartitionsByAssetSelector,
            PartitionsSelector,
        )

        selectors = [PartitionsByAssetSelector(asset_key=AssetKey(name), partitions=PartitionsSelector(
                         ranges=[PartitionRangeSelector(start=span[0], end=span[1])]))
                     for name, span in json.loads(args.subset).items()]
        backfill = PartitionBackfill.from_partitions_by_assets(
            backfill_id=backfill_id, asset_graph=graph, backfill_timestamp=started, tags={},
            dynamic_partitions_store=instance, partitions_by_assets=selectors, title="mainjob", description=None,
            run_config=None)
    else:
        backfill = PartitionBackfill.from_asset_partitions(
            backfill_id=backfill_id, asset_graph=graph, partition_names=partitions, asset_selection=keys,
            backfill_timestamp=started, tags={}, dynamic_partitions_store=instance, all_partitions=False,
            title="mainjob", description=None, run_config=None)
    instance.add_backfill(backfill)
    deadline = time.monotonic() + args.timeout
    while True:
        backfill = instance.get_backfill(backfill_id)
        assert backfill is not None
        if backfill.status not in (BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING, BulkActionStatus.FAILING):
            break
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    finished = time.time()
    runs = []
    for run in instance.get_runs(filters=RunsFilter(tags={"dagster/backfill": backfill_id})):
        events = []
        for entry in instance.all_logs(run.run_id):
            event = entry.dagster_event
            if event is None:
                continue
            kind = event.event_type_value
            if kind in ("STEP_START", "STEP_SUCCESS", "STEP_FAILURE", "ASSET_MATERIALIZATION", "RUN_ENQUEUED",
                        "RUN_STARTING", "RUN_START", "RUN_SUCCESS", "RUN_FAILURE"):
                item: dict[str, object] = {"kind": kind, "step": event.step_key, "at": entry.timestamp}
                if kind == "ASSET_MATERIALIZATION":
                    materialization = event.step_materialization_data.materialization
                    item["asset"] = materialization.asset_key.to_user_string()
                    item["partition"] = materialization.partition
                    item["metadata"] = {k: getattr(v, "value", None) for k, v in materialization.metadata.items()
                                        if isinstance(getattr(v, "value", None), (int, float, str))}
                events.append(item)
        runs.append({"run_id": run.run_id, "partition": run.tags.get("dagster/partition"),
                     "status": run.status.value, "events": events})
    args.out.write_text(json.dumps({"backfill": backfill_id, "status": backfill.status.value, "started": started,
                                    "finished": finished, "runs": runs}, indent=1))
    return 0 if backfill.status == BulkActionStatus.COMPLETED_SUCCESS else 1


if __name__ == "__main__":
    sys.exit(main())
