"""Which pipelines a DAG drives, and which epoch a DAG run worked on, from Airflow's metadata database.

A DAG drives a pipeline when one of its tasks is an :class:`~airflow_epochs.operators.OpenEpochOperator`
with a literal ``pipeline`` (a templated name cannot be known before a run): that is what the
serialized DAG records. A user sees a pipeline only through the DAGs they may read, so this mapping
is the authorisation boundary of the Epochs page.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

OPENER_TYPES = frozenset({"OpenEpochOperator"})


@dataclass(frozen=True)
class DagPipelines:
    """The pipelines one DAG version drives, and the task ids that open their epochs."""

    dag_id: str
    pipelines: frozenset[str]
    open_tasks: frozenset[str]


def pipelines_in(dag_id: str, data: Mapping[str, Any] | None) -> DagPipelines:
    """Read the opener tasks out of a serialized DAG (``SerializedDagModel.data``)."""
    pipelines: set[str] = set()
    tasks: set[str] = set()
    for encoded in ((data or {}).get("dag") or {}).get("tasks") or ():
        task = encoded.get("__var", encoded) if isinstance(encoded, Mapping) else None
        if not isinstance(task, Mapping):
            continue
        if task.get("task_type") not in OPENER_TYPES or not str(task.get("_task_module", "")).startswith(
                "airflow_epochs."):
            continue
        name = task.get("pipeline")
        if isinstance(name, str) and name and "{{" not in name:
            pipelines.add(name)
            tasks.add(str(task.get("task_id")))
    return DagPipelines(dag_id, frozenset(pipelines), frozenset(tasks))


class DagIndex:
    """DAG -> pipelines, cached per serialized DAG version (a DAG is decoded once per change)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], DagPipelines] = {}
        self._lock = threading.Lock()

    def of(self, dag_ids: Iterable[str]) -> dict[str, DagPipelines]:
        """The pipelines of each of ``dag_ids`` that drives one (latest DAG version)."""
        from airflow.models.serialized_dag import SerializedDagModel
        from airflow.utils.session import create_session
        from sqlalchemy import select

        wanted = sorted(set(dag_ids))
        if not wanted:
            return {}
        found: dict[str, DagPipelines] = {}
        with create_session() as session:
            latest: dict[str, tuple[Any, Any, str]] = {}
            rows = session.execute(
                select(SerializedDagModel.dag_id, SerializedDagModel.id, SerializedDagModel.created_at,
                       SerializedDagModel.dag_hash).where(SerializedDagModel.dag_id.in_(wanted)))
            for dag_id, row_id, created, dag_hash in rows:
                if dag_id not in latest or created > latest[dag_id][1]:
                    latest[dag_id] = (row_id, created, dag_hash)
            for dag_id, (row_id, _, dag_hash) in latest.items():
                key = (str(row_id), str(dag_hash))
                with self._lock:
                    known = self._cache.get(key)
                if known is None:
                    model = session.get(SerializedDagModel, row_id)
                    known = pipelines_in(dag_id, model.data if model is not None else None)
                    with self._lock:
                        self._cache[key] = known
                if known.pipelines:
                    found[dag_id] = known
        return found

    def epoch_of_run(self, dag_id: str, run_id: str) -> tuple[str, int] | None:
        """(pipeline, epoch) that the run's open task recorded in XCom, if it ran."""
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session
        from sqlalchemy import select

        index = self.of([dag_id]).get(dag_id)
        if index is None:
            return None
        with create_session() as session:
            rows = session.execute(select(XComModel.value).where(
                XComModel.dag_id == dag_id, XComModel.run_id == run_id, XComModel.key == "return_value",
                XComModel.task_id.in_(sorted(index.open_tasks))))
            for (value,) in rows:
                data = XComModel.deserialize_value(_Row(value))
                if isinstance(data, Mapping) and data.get("pipeline") in index.pipelines \
                        and isinstance(data.get("epoch"), int):
                    return str(data["pipeline"]), int(data["epoch"])
        return None


@dataclass(frozen=True)
class _Row:
    """The shape ``XComModel.deserialize_value`` reads (an object with ``.value``)."""

    value: Any
