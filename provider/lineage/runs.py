"""The OpenLineage run of an Airflow task instance, as the OpenLineage provider names it.

A producer's vote records it (``lineage_run`` in the vote), so the seal names every producer's run
and the sealing task's ``airflowEpochs`` facet can link them (``producerRuns``). Without Airflow's
OpenLineage provider there is no such run: None.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_epochs.coordination.wire.manifests import LINEAGE_DATASET, LINEAGE_RUN

log = logging.getLogger(__name__)

# The vote's keys (the records are the core's): the voting task's OpenLineage run, and the dataset its
# partition is known by when published (the table), so readers agree.
__all__ = ["LINEAGE_DATASET", "LINEAGE_RUN", "task_lineage_run"]


def task_lineage_run(task_instance: Any) -> dict[str, str] | None:
    """``{"namespace", "job", "runId"}`` of the task instance's OpenLineage run (the ids the provider's
    listener puts in the task's events), or None without the OpenLineage provider."""
    try:
        from airflow.providers.openlineage.plugins.macros import (
            lineage_job_name,
            lineage_job_namespace,
            lineage_run_id,
        )
    except ImportError:
        return None
    try:
        return {"namespace": str(lineage_job_namespace()), "job": str(lineage_job_name(task_instance)),
                "runId": str(lineage_run_id(task_instance))}
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # lineage is an addition: the task still votes
        log.warning("no OpenLineage run id for %s: %s", getattr(task_instance, "task_id", task_instance), exc)
        return None
