"""The OpenLineage run of an Airflow task instance, as the OpenLineage provider names it.

A producer's vote records it (``lineage_run`` in the vote), so the seal names every producer's run
and the sealing task's ``airflowEpochs`` facet can link them (``producerRuns``). Without Airflow's
OpenLineage provider, or with it disabled (no transport configured, or ``[openlineage] disabled``),
there is no such run: None.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_epochs.coordination.wire.manifests import LINEAGE_DATASET, LINEAGE_RUN

log = logging.getLogger(__name__)

# The vote's keys (the records are the core's): the voting task's OpenLineage run, and the dataset its
# partition is known by when published (the table), so readers agree.
__all__ = ["LINEAGE_DATASET", "LINEAGE_RUN", "lineage_enabled", "task_lineage_run"]


def lineage_enabled() -> bool:
    """Whether the OpenLineage provider is installed and emits events in this process (its own test: a
    transport, a config file or a URL is configured and ``[openlineage] disabled`` is not set)."""
    try:
        from airflow.providers.openlineage.conf import is_disabled
    except ImportError:
        return False
    return not is_disabled()


def task_lineage_run(task_instance: Any) -> dict[str, str] | None:
    """``{"namespace", "job", "runId"}`` of the task instance's OpenLineage run (the ids the provider's
    listener puts in the task's events), or None when no listener emits them (see :func:`lineage_enabled`).

    The provider's macros are imported only then: they load the OpenLineage client (about 0.8 CPU-seconds
    in a task process), which a deployment without lineage has no use for."""
    if not lineage_enabled():
        return None
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
