"""Partition deadlines (one family): a declared deadline, a predicted seal that moves with the votes,
and exactly one alert for a late partition across watchers and deployments.

- :mod:`.deadlines`: :class:`PartitionDeadlines` (declare, predict, decide, deliver the one alert);
- :mod:`.stats`: the producers' seal statistics the predictions come from;
- :mod:`.alerts`: late alerts of compacted epochs (pruned, archived);
- :mod:`.records`, :mod:`.paths`: the records and their znodes.
"""

from airflow_epochs.coordination.recipes.deadlines.deadlines import PartitionDeadlines, Verdict
from airflow_epochs.coordination.recipes.deadlines.records import (
    DeadlineSpec,
    LateAlert,
    ProducerForecast,
    SealForecast,
)

__all__ = ["DeadlineSpec", "LateAlert", "PartitionDeadlines", "ProducerForecast", "SealForecast", "Verdict"]
