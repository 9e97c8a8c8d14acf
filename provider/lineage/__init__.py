"""OpenLineage for epoch pipelines: the run facet of an epoch task and the datasets it read and sealed.

Needs the ``lineage`` extra (Airflow's OpenLineage provider). See :mod:`airflow_epochs.lineage.facets`.
"""
