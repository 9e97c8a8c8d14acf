"""The declared-producers example shared by the tests and the benchmark: partition ``sales`` of
pipeline ``declared`` waits for the three producer DAGs of ``tests/dags/declared_producers.py``
(two tasks and one asset), keyed by calendar day from 2026-01-01.

It lives here, not in a test module, because ``bench/producers.py`` runs outside pytest and imports it
from this folder, which it puts on its path explicitly (as it does for ``airflow_stack``).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow_epochs.coordination import EpochCalendar
from airflow_epochs.coordination.wire.declared import AssetProducer, CalendarKeys, DeclaredProducers, TaskProducer

DAY1 = datetime(2026, 1, 1, tzinfo=timezone.utc)
DECLARED = DeclaredProducers(
    {"sales": (TaskProducer("prod_eu", "load", name="eu"), TaskProducer("prod_us", "load", name="us"),
               AssetProducer("returns", "file:///data/returns", ("prod_returns",)))},
    CalendarKeys(EpochCalendar(DAY1, timedelta(days=1))),
)
