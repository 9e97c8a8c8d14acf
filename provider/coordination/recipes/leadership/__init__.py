"""The pipeline's leadership lease (one family): :mod:`.lease` (:class:`LeaderLease`, who holds it)
and :mod:`.records` (the lease's znode record)."""

from airflow_epochs.coordination.recipes.leadership.lease import LeaderLease, LeaseHolder

__all__ = ["LeaderLease", "LeaseHolder"]
