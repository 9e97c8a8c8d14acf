"""The demo's check: what the pipeline sealed epoch by epoch equals one Spark computation over all
the same days at once, read straight from the landed raw files.

The one-shot computation is written here on its own (it shares no code with the epoch jobs): per day,
carrier and origin the flights, cancellations, delayed departures, mean delay, adverse-weather flights
and the mean delays in clear and adverse hours, plus the running totals per carrier through the last
day. Counts are compared exactly (a count of nothing is 0, never null), means to 1e-9.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nycflights.data import FIRST_DAY, epoch_of_day, raw_location

COUNTS = ("flights", "cancelled", "delayed", "adverse_flights")
MEANS = ("mean_dep_delay", "clear_mean_delay", "adverse_mean_delay")
TOTALS = ("cum_flights", "cum_delay_minutes", "cum_cancelled")


def one_shot(spark: Any, raw: str | Path, days: Sequence[datetime.date]) -> tuple[Any, Any]:
    """Per-day figures and running totals for ``days``, in one Spark computation (pandas frames)."""
    from pyspark.sql import functions as F

    flights = spark.read.csv([str(raw_location(raw, "flights", d)) for d in days], header=True, nullValue="NA")
    weather = spark.read.csv([str(raw_location(raw, "weather", d)) for d in days], header=True, nullValue="NA")
    flights = flights.select(
        F.make_date(F.col("year").cast("int"), F.col("month").cast("int"), F.col("day").cast("int")).alias("date"),
        "carrier", "origin", F.col("dep_delay").cast("int").alias("dep_delay"),
        F.col("dep_time").isNull().alias("cancelled"), F.to_timestamp("time_hour").alias("time_hour"))
    hourly = weather.groupBy("origin", F.to_timestamp("time_hour").alias("time_hour")).agg(
        F.max(F.col("precip").cast("double")).alias("precip"), F.min(F.col("visib").cast("double")).alias("visib"))
    joined = flights.join(hourly, ["origin", "time_hour"], "left")
    known = F.col("precip").isNotNull() | F.col("visib").isNotNull()
    adverse = known & ((F.col("precip") > 0) | (F.col("visib") < 5))
    clear = known & ~adverse
    rows = None
    for dimension in ("carrier", "origin"):
        per_day = joined.groupBy("date", F.col(dimension).alias("key")).agg(
            F.count(F.lit(1)).alias("flights"),
            F.sum(F.when(F.col("cancelled"), 1).otherwise(0)).alias("cancelled"),
            F.sum(F.when(F.col("dep_delay") > 0, 1).otherwise(0)).alias("delayed"),
            F.avg("dep_delay").alias("mean_dep_delay"),
            F.sum(F.when(adverse, 1).otherwise(0)).alias("adverse_flights"),
            F.avg(F.when(clear, F.col("dep_delay"))).alias("clear_mean_delay"),
            F.avg(F.when(adverse, F.col("dep_delay"))).alias("adverse_mean_delay"),
        ).withColumn("dimension", F.lit(dimension))
        rows = per_day if rows is None else rows.unionByName(per_day)
    assert rows is not None
    daily = rows.withColumn("epoch", F.datediff("date", F.lit(FIRST_DAY.isoformat())) + 1).drop("date")
    totals = flights.groupBy("carrier").agg(
        F.count(F.lit(1)).alias("cum_flights"),
        F.coalesce(F.sum("dep_delay"), F.lit(0)).cast("long").alias("cum_delay_minutes"),
        F.sum(F.when(F.col("cancelled"), 1).otherwise(0)).alias("cum_cancelled"))
    return daily.toPandas(), totals.toPandas()


@dataclass
class CheckResult:
    """Row-for-row comparison of the sealed figures with the one-shot computation."""

    days: list[datetime.date]
    rows: list[dict[str, Any]] = field(default_factory=list)      # one per (epoch, dimension, key)
    totals: list[dict[str, Any]] = field(default_factory=list)    # one per carrier
    zero_counts: list[str] = field(default_factory=list)          # rows whose every flight was cancelled

    @property
    def mismatches(self) -> int:
        return sum(not r["equal"] for r in self.rows) + sum(not t["equal"] for t in self.totals)

    @property
    def equal(self) -> bool:
        return self.mismatches == 0 and bool(self.rows)

    def summary(self) -> str:
        verdict = "all equal" if self.equal else f"{self.mismatches} DIFFER"
        first, last = epoch_of_day(self.days[0]), epoch_of_day(self.days[-1])
        return (f"sealed results vs one Spark computation over days {first}..{last}: {len(self.rows)} daily rows "
                f"and {len(self.totals)} running totals, {verdict}")

    def markdown(self) -> str:
        """The comparison, every row, as Markdown tables (sealed value / one-shot value where they differ)."""
        lines = [f"{self.summary()}.", ""]
        if self.zero_counts:
            lines += ["Days on which every flight of a carrier was cancelled (its counts must be 0, not null): "
                      + "; ".join(self.zero_counts) + ".", ""]
        lines += ["| epoch | day | dimension | key | " + " | ".join(COUNTS + MEANS) + " | equal |",
                  "|" + "---|" * (len(COUNTS) + len(MEANS) + 5)]
        for r in self.rows:
            cells = [_cell(r["sealed"].get(c), r["oneshot"].get(c)) for c in COUNTS + MEANS]
            lines.append(f"| {r['epoch']} | {r['day']} | {r['dimension']} | {r['key']} | " + " | ".join(cells)
                         + f" | {'yes' if r['equal'] else '**no**'} |")
        lines += ["", f"Running totals per carrier through epoch {epoch_of_day(self.days[-1])}:", "",
                  "| carrier | " + " | ".join(TOTALS) + " | equal |", "|" + "---|" * (len(TOTALS) + 2)]
        for t in self.totals:
            cells = [_cell(t["sealed"].get(c), t["oneshot"].get(c)) for c in TOTALS]
            lines.append(f"| {t['carrier']} | " + " | ".join(cells) + f" | {'yes' if t['equal'] else '**no**'} |")
        return "\n".join(lines) + "\n"


def _cell(sealed: Any, oneshot: Any) -> str:
    text = "null" if _missing(sealed) else (f"{sealed:.4f}" if isinstance(sealed, float) else str(sealed))
    return text if _same(sealed, oneshot, exact=not isinstance(sealed, float)) else f"{text} / {oneshot}"


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _same(a: Any, b: Any, *, exact: bool) -> bool:
    if _missing(a) or _missing(b):
        return _missing(a) and _missing(b)
    if exact:
        return bool(a == b)
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


def _plain(value: Any) -> Any:
    """numpy scalars -> Python numbers (for comparison and printing)."""
    return value.item() if hasattr(value, "item") else value


def compare(sealed_daily: Any, sealed_totals: Any, oneshot_daily: Any, oneshot_totals: Any,
            days: Sequence[datetime.date]) -> CheckResult:
    """Compare pandas frames: sealed (epoch, dimension, key, ...) rows and totals with the one-shot ones."""
    result = CheckResult(list(days))
    key = ["epoch", "dimension", "key"]
    sealed = {tuple(_plain(v) for v in row[key]): row for _, row in sealed_daily.iterrows()}
    oneshot = {tuple(_plain(v) for v in row[key]): row for _, row in oneshot_daily.iterrows()}
    for k in sorted(set(sealed) | set(oneshot), key=lambda k: (k[0], k[1], str(k[2]))):
        s = {c: _plain(sealed[k][c]) for c in COUNTS + MEANS} if k in sealed else {}
        o = {c: _plain(oneshot[k][c]) for c in COUNTS + MEANS} if k in oneshot else {}
        equal = bool(s) and bool(o) and all(_same(s[c], o[c], exact=True) for c in COUNTS) and \
            all(_same(s[c], o[c], exact=False) for c in MEANS)
        epoch = int(k[0])
        result.rows.append({"epoch": epoch, "day": FIRST_DAY + datetime.timedelta(days=epoch - 1),
                            "dimension": k[1], "key": k[2], "sealed": s, "oneshot": o, "equal": equal})
        if s and s["flights"] == s["cancelled"]:  # every flight cancelled: no departure, nothing delayed
            result.zero_counts.append(f"epoch {epoch} {k[1]} {k[2]}: {s['flights']} flight(s), all cancelled, "
                                      f"delayed = {'null' if _missing(s['delayed']) else s['delayed']}")
    st = {row["carrier"]: row for _, row in sealed_totals.iterrows()}
    ot = {row["carrier"]: row for _, row in oneshot_totals.iterrows()}
    for carrier in sorted(set(st) | set(ot)):
        s = {c: _plain(st[carrier][c]) for c in TOTALS} if carrier in st else {}
        o = {c: _plain(ot[carrier][c]) for c in TOTALS} if carrier in ot else {}
        equal = bool(s) and bool(o) and all(_same(s[c], o[c], exact=True) for c in TOTALS)
        result.totals.append({"carrier": carrier, "sealed": s, "oneshot": o, "equal": equal})
    return result


def check_sealed(spark: Any, ledger: Any, raw: str | Path, days: Sequence[datetime.date]) -> CheckResult:
    """Read what the pipeline sealed for ``days`` (through the seals only) and compare it with
    :func:`one_shot` over the same raw files."""
    import pandas as pd

    from airflow_epochs.spark import sealed_outputs

    epochs = [epoch_of_day(d) for d in days]
    frames = [pd.read_parquet(item.path) for item in sealed_outputs(ledger, "daily", epochs)]
    sealed_daily = pd.concat(frames, ignore_index=True)
    [snapshot] = sealed_outputs(ledger, "daily", [epochs[-1]], output="snapshot")
    sealed_totals = pd.read_parquet(snapshot.path)
    oneshot_daily, oneshot_totals = one_shot(spark, raw, days)
    return compare(sealed_daily, sealed_totals, oneshot_daily, oneshot_totals, days)
