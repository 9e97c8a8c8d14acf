"""Shared pieces of the Spark epoch tests: deterministic inputs, the expected figures computed with
pandas straight from those inputs, and what a pipeline run left behind, read only through seals."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pandas as pd

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.spark import read_sealed, run_epoch, sealed_outputs, submit_and_seal

JOB = Path(__file__).resolve().parents[1] / "spark_jobs" / "running_totals.py"
PARTITION = "totals"
PRODUCER = "job"
KEYS = "abcdefg"
EPOCHS = 5


def write_inputs(folder: Path, epochs: int, *, seed: int = 7) -> dict[int, str]:
    """One CSV of (key, amount) events per epoch; returns epoch -> location."""
    rng = random.Random(seed)
    locations = {}
    for epoch in range(1, epochs + 1):
        path = folder / f"events-{epoch}"
        path.mkdir(parents=True, exist_ok=True)
        with open(path / "part-0.csv", "w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(["key", "amount"])
            for _ in range(rng.randint(40, 80)):
                writer.writerow([rng.choice(KEYS[: 3 + epoch % 5]), rng.randint(1, 500)])
        locations[epoch] = str(path)
    return locations


def expected(inputs: dict[int, str], through: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-epoch totals and the running totals after ``through``, computed with pandas."""
    frames = []
    for epoch in range(1, through + 1):
        frame = pd.read_csv(Path(inputs[epoch]) / "part-0.csv", dtype={"key": str})
        frame["epoch"] = epoch
        frames.append(frame)
    events = pd.concat(frames)
    daily = (events.groupby(["epoch", "key"]).agg(events=("amount", "size"), amount=("amount", "sum"))
             .reset_index().sort_values(["epoch", "key"]).reset_index(drop=True))
    running = (events.groupby("key").agg(total_events=("amount", "size"), total_amount=("amount", "sum"))
               .reset_index().sort_values("key").reset_index(drop=True))
    return daily, running


def sealed_result(spark, ledger: EpochLedger, through: int) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """What a consumer sees: per-epoch totals, the last sealed running totals, and the data checksums."""
    daily = (read_sealed(spark, ledger.pipeline, PARTITION, range(1, through + 1), zookeeper=ledger,
                         with_epoch=False).toPandas()
             .sort_values(["epoch", "key"]).reset_index(drop=True))
    snap = ledger.last_sealed_snapshot(PARTITION, producer=PRODUCER)
    assert snap is not None and snap.epoch == through
    running = spark.read.parquet(snap.pointer["path"]).toPandas().sort_values("key").reset_index(drop=True)
    checksums = [o.checksum for o in sealed_outputs(ledger, PARTITION, range(1, through + 1))]
    checksums += [o.checksum for o in sealed_outputs(ledger, PARTITION, [through], output="snapshot")]
    return daily, running, checksums


def assert_matches_pandas(daily: pd.DataFrame, running: pd.DataFrame, inputs: dict[int, str], through: int) -> None:
    want_daily, want_running = expected(inputs, through)
    got = daily[["epoch", "key", "events", "amount"]].astype({"epoch": int, "events": int, "amount": int})
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want_daily.astype(
        {"epoch": int, "events": int, "amount": int}), check_dtype=False)
    got_running = running[["key", "total_events", "total_amount"]].astype({"total_events": int, "total_amount": int})
    pd.testing.assert_frame_equal(got_running.reset_index(drop=True), want_running.astype(
        {"total_events": int, "total_amount": int}), check_dtype=False)


def run_dirs(storage: Path, pipeline: str, epoch: int) -> list[str]:
    """Every run directory present on disk for the partition at ``epoch`` (sealed or not)."""
    base = storage / pipeline / PARTITION / f"epoch={epoch}"
    return sorted(str(p) for p in base.glob("attempt=*/run=*"))


def job_main():
    import runpy

    return runpy.run_path(str(JOB), run_name="job")["main"]


def runner_for(spark):
    main = job_main()
    return lambda context: run_epoch(main, spark, context)


def pipeline(zk, name: str) -> EpochLedger:
    ledger = EpochLedger(zk, name, owner="tests")
    ledger.create_pipeline(PipelineConfig({PARTITION: (PRODUCER,)}))
    return ledger


def run_clean(zk, spark, storage: Path, inputs, name: str) -> EpochLedger:
    ledger = pipeline(zk, name)
    for epoch in range(1, EPOCHS + 1):
        attempt = ledger.open_epoch(epoch)
        outcome = submit_and_seal(zk, attempt, PARTITION, PRODUCER, storage=str(storage), runner=runner_for(spark),
                                  inputs={"events": inputs[epoch]})
        assert outcome.action == "ran" and outcome.partition_sealed and outcome.epoch_sealed
        assert outcome.snapshot_epoch == (epoch - 1 or None)
    return ledger
