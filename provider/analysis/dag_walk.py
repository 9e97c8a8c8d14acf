"""Blazes coordination analysis of Airflow DAGs: the walk over a DAG's tasks and dependencies, and the
loading of DAG files.

Each task is a component of the dataflow and each dependency a stream (see
:mod:`airflow_epochs.analysis.labels` for the labels and :mod:`airflow_epochs.analysis.rules` for the
rules). Our own operators and sensors come labelled; any other task is labelled with
:func:`airflow_epochs.analysis.blazes_label` (:mod:`airflow_epochs.analysis.tasks`)::

    from airflow_epochs.analysis import blazes_label

    counts = blazes_label(count_words(words), "OR", gate=("epoch", "word"))  # a @task call
    blazes_label(load, "CW")                                                  # a classic operator
    blazes_label(wait_for_success_file, "CR", seals=("day",))                # it observes a seal

Unlabelled tasks are reported and treated as order-sensitive on an unknown gate, which only a total
order satisfies. Labels live on the task objects, which DAG serialisation drops: the analysis reads
DAG files (:func:`load_dags`), never the metadata database.

Importing this module imports nothing from Airflow; walking and parsing DAGs does.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_epochs.analysis.labels import ASYNC, StreamLabel, seal
from airflow_epochs.analysis.rules import Analysis, analyse
from airflow_epochs.analysis.tasks import EPOCH, component_of, operator_roles
from airflow_epochs.coordination import InvalidInput

#: URIs of the assets :func:`airflow_epochs.operators.partition_asset` stands for sealed partitions with
SEALED_ASSET_SCHEME = "epochs://"


class AnalysisInputError(InvalidInput):
    """A DAG file or id that cannot be analysed (missing, fails to import, holds no DAG)."""


def epoch_order_regions(dag: Any) -> dict[str, str]:
    """Tasks that run in epoch order, with the open task that orders them.

    Epoch e opens only after e-1 is sealed, and e-1 is sealed only after its votes: so a task that
    runs after the open task and before one of the epoch's votes (a ``VotePartitionOperator`` or a
    ``SparkEpochOperator`` of that attempt) of run e finishes before any such task of run e+1 starts.
    """
    from airflow_epochs.operators import OpenEpochOperator, SparkEpochOperator, VotePartitionOperator

    regions: dict[str, str] = {}
    for opener in dag.tasks:
        if not isinstance(opener, OpenEpochOperator):
            continue
        after = dag.get_task(opener.task_id).get_flat_relative_ids(upstream=False)
        votes = [t for t in dag.tasks if isinstance(t, (VotePartitionOperator, SparkEpochOperator))
                 and t.attempt_task_id == opener.task_id and t.task_id in after]
        for vote in votes:
            for task_id in (dag.get_task(vote.task_id).get_flat_relative_ids(upstream=True) | {vote.task_id}) & after:
                regions.setdefault(task_id, opener.task_id)
    return regions


def _assets(condition: Any) -> Iterator[Any]:
    if condition is None:
        return
    if hasattr(condition, "uri"):
        yield condition
    elif hasattr(condition, "objects"):
        for item in condition.objects:
            yield from _assets(item)
    else:
        yield condition  # an alias or a reference: not known to be one of our sealed partitions


def dag_source(dag: Any) -> tuple[StreamLabel, str]:
    """The label of what a DAG run hands its first tasks, and why.

    A DAG scheduled on our sealed partitions' assets as partitioned assets (one run per sealed epoch)
    starts from ``Seal[epoch]``; any other schedule starts from ``Async`` (runs overlap, retry, run
    in two deployments, and nothing says when external data is complete).
    """
    timetable = getattr(dag, "timetable", None)
    if type(timetable).__name__ == "PartitionedAssetTimetable":
        assets = list(_assets(getattr(timetable, "asset_condition", None)))
        if assets and all(str(getattr(a, "uri", "")).startswith(SEALED_ASSET_SCHEME) for a in assets):
            return seal(EPOCH), "one run per sealed epoch of " + ", ".join(str(a.uri) for a in assets)
    return ASYNC, "runs may overlap, retry or come from two deployments"


@dataclass(frozen=True)
class DagAnalysis:
    """The analysis of one DAG, with where it came from."""

    dag_id: str
    fileloc: str
    source: StreamLabel
    source_reason: str
    analysis: Analysis


def analyse_dag(dag: Any) -> DagAnalysis:
    """Build the component graph of ``dag`` (an Airflow DAG parsed from its file) and analyse it."""
    roles = operator_roles()
    regions = epoch_order_regions(dag)
    components = [component_of(task, dag, roles, regions.get(task.task_id)) for task in dag.tasks]
    edges = [(task.task_id, nxt) for task in dag.tasks for nxt in sorted(task.downstream_task_ids)]
    source, reason = dag_source(dag)
    result = analyse(components, edges, source=source, preferred_keys=(EPOCH,))
    return DagAnalysis(dag.dag_id, str(getattr(dag, "fileloc", "") or ""), source, reason, result)


def _bag(folder: str) -> Any:
    """Parse DAG files into a DagBag. What parsing prints (Airflow's progress lines, import tracebacks,
    deprecation notices) is held back: import errors are reported from ``import_errors`` instead."""
    from airflow.dag_processing.dagbag import DagBag

    importer = logging.getLogger("airflow.dag_processing")
    level = importer.level
    held = io.StringIO()
    importer.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(held), contextlib.redirect_stderr(held):
            warnings.simplefilter("ignore", DeprecationWarning)
            return DagBag(dag_folder=folder, load_op_links=False)
    finally:
        importer.setLevel(level)


def _first_error(errors: dict[str, str]) -> str:
    where, trace = next(iter(errors.items()))
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip()]
    return f"{where}: {lines[-1] if lines else 'import failed'}"


def load_dags(target: str, *, dags_folder: str | None = None) -> list[Any]:
    """The DAGs to analyse: every DAG of a DAG file or folder, or the DAG with this id in the DAGs folder.

    :param target: a path to a ``.py`` file or a folder of them, or a DAG id.
    :param dags_folder: where to look a DAG id up (default: Airflow's configured DAGs folder).
    :raises AnalysisInputError: the file is missing or fails to import, holds no DAG, or no DAG has
        that id.
    """
    path = Path(target)
    if path.suffix == ".py" or os.sep in target or path.exists():
        if not path.is_file() and not path.is_dir():
            raise AnalysisInputError(f"no DAG file {target!r}")
        bag = _bag(str(path.resolve()))
        if bag.import_errors:
            raise AnalysisInputError(f"cannot load {_first_error(bag.import_errors)}")
        if not bag.dags:
            raise AnalysisInputError(f"{target!r} defines no DAG")
        return [bag.dags[dag_id] for dag_id in sorted(bag.dags)]
    if dags_folder is None:
        from airflow.configuration import conf

        dags_folder = conf.get("core", "dags_folder")
    if not Path(dags_folder).is_dir():
        raise AnalysisInputError(f"{target!r} is not a file, and the DAGs folder {dags_folder!r} does not exist")
    bag = _bag(dags_folder)
    if target in bag.dags:
        return [bag.dags[target]]
    broken = f"; {len(bag.import_errors)} DAG file(s) failed to import, e.g. {_first_error(bag.import_errors)}" \
        if bag.import_errors else ""
    raise AnalysisInputError(f"no DAG {target!r} in the DAGs folder {dags_folder}{broken}")


def analyse_target(target: str, *, dags_folder: str | None = None) -> list[DagAnalysis]:
    """:func:`load_dags` then :func:`analyse_dag` on each."""
    return [analyse_dag(dag) for dag in load_dags(target, dags_folder=dags_folder)]
