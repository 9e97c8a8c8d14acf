"""Blazes coordination analysis of Airflow DAGs (``airflow-epochs analyze``): where a dataflow needs
coordination, which kind, and where it has more than it needs.

- :mod:`~airflow_epochs.analysis.labels`: path and stream labels, and how a label passes a path;
- :mod:`~airflow_epochs.analysis.rules`: the coordination each path needs, under and over coordination;
- :mod:`~airflow_epochs.analysis.tasks`: :func:`blazes_label` and the labels of our own operators;
- :mod:`~airflow_epochs.analysis.dag_walk`: an Airflow DAG as a dataflow, and loading DAG files;
- :mod:`~airflow_epochs.analysis.report`: the table, JSON, DOT and PNG the command shows.

DAG files label their tasks with ``from airflow_epochs.analysis import blazes_label``. Importing this
package imports nothing from Airflow.
"""

from __future__ import annotations

from airflow_epochs.analysis.dag_walk import (
    AnalysisInputError,
    DagAnalysis,
    analyse_dag,
    analyse_target,
    epoch_order_regions,
    load_dags,
)
from airflow_epochs.analysis.tasks import LABEL_ATTRIBUTE, blazes_label

__all__ = [
    "LABEL_ATTRIBUTE",
    "AnalysisInputError",
    "DagAnalysis",
    "analyse_dag",
    "analyse_target",
    "blazes_label",
    "epoch_order_regions",
    "load_dags",
]
