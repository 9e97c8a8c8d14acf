"""What a waiting trigger says while it waits on something that may never come (a pipeline that does not
exist, an epoch far past the frontier): the kernel's :func:`~airflow_epochs.coordination.state.watches.pipeline_notice`,
asked at once and every :data:`NOTICE_EVERY` seconds, in the trigger's log (the task's ``.trigger`` log, or
the console of ``airflow dags test``)."""

from __future__ import annotations

from airflow_epochs.coordination.state.watches import FAR_PAST_FRONTIER, MAX_NAMED, pipeline_notice

__all__ = ["FAR_PAST_FRONTIER", "MAX_NAMED", "NOTICE_EVERY", "pipeline_notice"]

NOTICE_EVERY = 300.0  # seconds between two notices of the same wait
