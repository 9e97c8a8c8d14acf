"""The epoch job contract, as seen from inside a PySpark driver.

A job is a function ``main(spark, job)``; the same file runs through ``spark-submit`` and on a warm
Spark Connect session::

    from airflow_epochs.spark import EpochJob, run_job

    def main(spark, job: EpochJob) -> None:
        events = job.read_input("events")
        previous = job.read_snapshot()          # None at the first epoch
        totals = ...                             # this epoch's result
        job.write(totals)
        job.write_snapshot(totals)
        # the manifest is written by run_job (or call job.finish() yourself)

    if __name__ == "__main__":
        run_job(main)

Everything the job writes goes to its own run directory; it becomes visible only when the operator
votes the manifest and the partition is sealed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from airflow_epochs.coordination.base.errors import InvalidInput, StateError
from airflow_epochs.spark.context import EpochContext
from airflow_epochs.spark.storage import data_files, read_manifest, run_location, write_manifest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SNAPSHOT = "snapshot"
_FORMATS = ("parquet", "orc", "json", "csv")


class JobAlreadyFinished(StateError):
    """The job's manifest is written; its output can no longer change."""


def content_checksum(frame: DataFrame) -> tuple[int, str]:
    """Row count and an order-independent checksum (sum of 64-bit row hashes) of a DataFrame.

    Equal data gives an equal checksum whatever its file layout; a duplicated or missing row changes it.
    """
    from pyspark.sql import functions as F

    columns = [F.col(f"`{name}`") for name in frame.columns]
    row = frame.agg(F.count(F.lit(1)).alias("rows"),
                    F.sum(F.xxhash64(*columns).cast("decimal(38,0)")).alias("checksum")).collect()[0]
    return int(row["rows"]), str(row["checksum"] if row["checksum"] is not None else 0)


class EpochJob:
    """One producer's job at one epoch: its inputs, its previous snapshot, and its output directory.

    :param spark: the session (classic or Spark Connect).
    :param context: the epoch context the operator passed.
    """

    def __init__(self, spark: SparkSession, context: EpochContext) -> None:
        self.spark = spark
        self.context = context
        self.location = run_location(context.storage, context.pipeline, context.partition, context.epoch,
                                     context.attempt, context.run)
        self.outputs: dict[str, dict[str, Any]] = {}
        self.finished = False
        self.started_at = time.time()

    @property
    def epoch(self) -> int:
        return self.context.epoch

    def input(self, name: str) -> str | list[str]:
        """The location (or locations) of input ``name`` for this epoch."""
        try:
            value = self.context.inputs[name]
        except KeyError:
            raise InvalidInput(f"epoch {self.epoch}: no input named {name!r} (have {sorted(self.context.inputs)})"
                               ) from None

        return value if isinstance(value, str) else list(value)

    def read_input(self, name: str, *, format: str = "parquet", **options: Any) -> DataFrame:
        """Read input ``name`` (any Spark reader format; ``options`` go to the reader)."""
        return self.spark.read.format(_check_format(format)).options(**options).load(self.input(name))

    def read_snapshot(self) -> DataFrame | None:
        """The snapshot the last sealed epoch left (None when there is none yet)."""
        pointer = self.context.snapshot
        if pointer is None:
            return None
        return self.spark.read.format(_check_format(str(pointer.get("format", "parquet")))).load(str(pointer["path"]))

    def write(self, frame: DataFrame, *, name: str = "data", format: str = "parquet",
              partition_by: Sequence[str] = ()) -> dict[str, Any]:
        """Write ``frame`` as output ``name`` into this run's directory and record its counts and checksum."""
        if self.finished:
            raise JobAlreadyFinished(f"epoch {self.epoch}: the manifest is written; {name!r} comes too late")
        if not name.isidentifier():
            raise InvalidInput(f"output name must be an identifier, not {name!r}")
        if name in self.outputs:
            raise InvalidInput(f"epoch {self.epoch}: output {name!r} is already written")
        path = f"{self.location}/{name}"
        writer = frame.write.format(_check_format(format)).mode("error")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.save(path)
        # Count what is on disk, not what was planned: the manifest vouches for the files.
        rows, checksum = content_checksum(self.spark.read.format(format).load(path))
        files = data_files(path)
        self.outputs[name] = {"path": path, "format": format, "rows": rows, "checksum": checksum,
                              "files": len(files), "bytes": sum(size for _, size in files)}
        return self.outputs[name]

    def write_snapshot(self, frame: DataFrame) -> dict[str, Any]:
        """Write the state this epoch leaves for the next one (read back there by :meth:`read_snapshot`)."""
        return self.write(frame, name=SNAPSHOT)

    def finish(self, **extra: Any) -> dict[str, Any]:
        """Write the manifest (last: its presence means the run is complete) and return it."""
        if self.finished:
            raise JobAlreadyFinished(f"epoch {self.epoch}: the manifest is already written")
        if not self.outputs:
            raise InvalidInput(f"epoch {self.epoch}: the job wrote no output; nothing to put in a manifest")
        ctx = self.context
        manifest = {
            "pipeline": ctx.pipeline, "partition": ctx.partition, "producer": ctx.producer, "epoch": ctx.epoch,
            "attempt": ctx.attempt, "run": ctx.run, "config_version": ctx.config_version,
            "location": self.location, "outputs": self.outputs,
            "snapshot_from": None if ctx.snapshot is None else ctx.snapshot.get("epoch"),
            "seconds": round(time.time() - self.started_at, 3), "extra": extra,
        }
        write_manifest(self.location, manifest)
        self.finished = True
        return dict(read_manifest(self.location) or manifest)


def _check_format(value: str) -> str:
    if value not in _FORMATS:
        raise InvalidInput(f"format must be one of {list(_FORMATS)}, not {value!r}")
    return value


def run_epoch(main: Callable[[Any, EpochJob], Any], spark: Any, context: EpochContext) -> dict[str, Any]:
    """Run ``main(spark, job)`` for ``context`` on an existing session and return the manifest."""
    job = EpochJob(spark, context)
    main(spark, job)
    return job.finish() if not job.finished else dict(read_manifest(job.location) or {})


def run_job(main: Callable[[Any, EpochJob], Any], argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The driver entry point under ``spark-submit``: read the context, run ``main``, write the manifest."""
    from pyspark.sql import SparkSession

    context = EpochContext.from_argv(sys.argv[1:] if argv is None else argv)
    spark = SparkSession.builder.appName(
        f"epochs:{context.pipeline}:{context.partition}:{context.epoch}").getOrCreate()
    try:
        return run_epoch(main, spark, context)
    finally:
        spark.stop()
