"""Blazes coordination analysis of Airflow DAGs: the DAG walker, our operators' labels, and the API to
label any other task.

Each task is a component of the dataflow and each dependency a stream (see
:mod:`airflow_epochs.coordination.blazes` for the labels and rules). Our own operators and sensors come
labelled (a registry keyed by class below); any other task is labelled with :func:`blazes_label`::

    from airflow_epochs.analysis import blazes_label

    counts = blazes_label(count_words(words), "OR", gate=("epoch", "word"))  # a @task call
    blazes_label(load, "CW")                                                  # a classic operator
    blazes_label(wait_for_success_file, "CR", seals=("day",))                # it observes a seal

Unlabelled tasks are reported and treated as order-sensitive on an unknown gate, which only a total
order satisfies.

Labels live on the task object (attribute :data:`LABEL_ATTRIBUTE`); Airflow's DAG serialisation drops
such attributes, so the analysis reads DAG files (:func:`load_dags`), never the metadata database.

Importing this module imports nothing from Airflow; walking and parsing DAGs does.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from airflow_epochs.coordination import InvalidInput
from airflow_epochs.coordination.blazes import (
    ASYNC,
    Analysis,
    Component,
    PathLabel,
    StreamLabel,
    analyse,
    attribute_set,
    combine,
    seal,
)

#: the task attribute holding a :func:`blazes_label` annotation (plain JSON-ready data)
LABEL_ATTRIBUTE = "blazes_annotation"
#: the attribute every epoch, partition seal and frontier is keyed by
EPOCH = "epoch"
#: URIs of the assets :func:`airflow_epochs.operators.partition_asset` stands for sealed partitions with
SEALED_ASSET_SCHEME = "epochs://"
COORDINATION_KINDS = ("lock", "order")

Labelled = TypeVar("Labelled")


class AnalysisInputError(InvalidInput):
    """A DAG file or id that cannot be analysed (missing, fails to import, holds no DAG)."""


def _operator_of(task: Any) -> Any:
    """The operator behind ``task``: itself, or the operator of a ``@task`` call's XComArg."""
    operator = getattr(task, "operator", None)
    candidate = operator if operator is not None and hasattr(operator, "task_id") else task
    if not hasattr(candidate, "task_id") or not hasattr(candidate, "downstream_task_ids"):
        raise InvalidInput(f"blazes_label needs an Airflow task (an operator or a @task call), not {task!r}")
    return candidate


def blazes_label(task: Labelled, label: str, gate: Sequence[str] | None = None, *, path: str = "",
                 seals: Sequence[str] | None = None, input_seal: Sequence[str] | None = None,
                 coordination: str | None = None) -> Labelled:
    """Annotate a task for :func:`analyse_dag` (the graybox labels of Blazes); returns ``task``.

    :param task: a classic operator, or what calling a ``@task`` function returned.
    :param label: ``CR`` (confluent, stateless), ``CW`` (confluent, stateful), ``OR`` or ``OW``
        (order-sensitive, stateless or stateful).
    :param gate: for ``OR``/``OW``, the attributes within whose groups order matters, e.g.
        ``("carrier", "day")``; ``()`` when it matters over the whole stream. Required for them,
        refused for ``CR``/``CW``.
    :param path: name of this path when the task has several (label each one; a repeated name
        replaces the earlier label).
    :param seals: attributes the task's output is sealed on: it produces or observes punctuation
        (e.g. it waits for a day's ``_SUCCESS`` marker: ``seals=("day",)``).
    :param input_seal: attributes the data it reads from outside the DAG is sealed on (e.g. a day's
        files land atomically: ``("epoch",)``); ``()`` for complete input. Without it, the external
        input of a ``SparkEpochOperator`` (its ``inputs``) is taken as unsealed.
    :param coordination: ``"lock"`` when the task runs under a global lock (checked for
        over-coordination), ``"order"`` when its input is delivered in one total order by other means.
    :raises InvalidInput: a bad label, gate, seal key or coordination, naming the value.
    """
    operator = _operator_of(task)
    if label in ("OR", "OW") and gate is None:
        raise InvalidInput(f"task {operator.task_id!r}: a {label} label needs a gate (the attributes within "
                           f"which order matters, () for the whole stream)")
    checked = PathLabel.of(label, gate, path)
    key = attribute_set("seals", seals)
    external = attribute_set("input_seal", input_seal)
    if coordination is not None and coordination not in COORDINATION_KINDS:
        raise InvalidInput(f"task {operator.task_id!r}: coordination must be one of {COORDINATION_KINDS} or None, "
                           f"not {coordination!r}")
    current = dict(getattr(operator, LABEL_ATTRIBUTE, None) or {})
    paths = [p for p in current.get("paths", []) if p["name"] != path]
    paths.append({"kind": checked.kind, "gate": None if checked.gate is None else sorted(checked.gate),
                  "name": path})
    current["paths"] = paths
    if key is not None:
        current["seals"] = sorted(key)
    if external is not None:
        current["input_seal"] = sorted(external)
    if coordination is not None:
        current["coordination"] = coordination
    setattr(operator, LABEL_ATTRIBUTE, current)
    return task


@dataclass(frozen=True)
class OperatorRole:
    """What one of our operator classes does, in Blazes terms.

    :param paths: its path labels; ``None`` when it runs user code (labelled with :func:`blazes_label`).
    :param seals: the key its output is sealed on.
    :param ordered_by: what orders its input, when the operator itself does.
    :param order_key: the attributes that ordering runs through one value at a time.
    :param synchronises: ``"barrier"`` or ``"lock"`` when it is such a mechanism.
    :param external: the label of what it reads from outside the DAG, when it reads anything.
    :param note: shown beside the verdict.
    """

    paths: tuple[PathLabel, ...] | None
    seals: frozenset[str] | None = None
    ordered_by: str | None = None
    order_key: frozenset[str] = frozenset()
    synchronises: Literal["lock", "barrier"] | None = None
    external: StreamLabel | None = None
    note: str = ""


CR = (PathLabel("CR"),)
CW = (PathLabel("CW"),)
LEDGER_ORDER = (PathLabel("OW", frozenset()),)
EPOCH_KEY = frozenset({EPOCH})


def _partitions(value: Any) -> str:
    return value if isinstance(value, str) else ", ".join(str(p) for p in value)


def _barrier_policies(dag: Any, barrier: str) -> set[str]:
    from airflow_epochs.operators import ArriveAtBarrierOperator

    return {task.policy.kind for task in dag.tasks
            if isinstance(task, ArriveAtBarrierOperator) and task.barrier == barrier}


def _barrier_role(dag: Any, barrier: str, what: str) -> OperatorRole:
    if "quorum" in _barrier_policies(dag, barrier):
        # Which participants a quorum release lets through depends on who arrived in time: an
        # order-sensitive read of the arrivals, over the whole stream.
        return OperatorRole((PathLabel("OR", frozenset()),), synchronises="barrier",
                            note=f"{what} {barrier!r} with a quorum policy: what it releases depends on who arrived "
                                 f"in time")
    return OperatorRole(CR, EPOCH_KEY, synchronises="barrier",
                        note=f"{what} {barrier!r}: releases when every participant of the epoch arrived")


def _roles() -> dict[type, Callable[[Any, Any], OperatorRole]]:
    """The labels of our operators and sensors, by class (the most derived class wins)."""
    from airflow_epochs.operators import (
        AcknowledgeEpochOperator,
        ArriveAtBarrierOperator,
        CloseEpochOperator,
        OpenEpochOperator,
        ReconfigureOperator,
        RollbackOperator,
        SparkEpochOperator,
        VotePartitionOperator,
    )
    from airflow_epochs.sensors import BarrierSensor, FrontierSensor, SealedPartitionSensor

    def arrive(task: Any, dag: Any) -> OperatorRole:
        if task.wait:
            return _barrier_role(dag, task.barrier, "arrives and waits at barrier")
        return OperatorRole(CW, note=f"records its arrival at barrier {task.barrier!r} (a vote: confluent)")

    def spark(task: Any, dag: Any) -> OperatorRole:
        # Its ``inputs`` come from outside the DAG (unsealed unless declared); ``sealed_inputs`` are
        # read through seals only.
        reads = [ASYNC] if task.inputs else []
        reads += [seal(EPOCH)] if task.sealed_inputs else []
        sealed = f"; reads sealed {', '.join(sorted(task.sealed_inputs.values()))}" if task.sealed_inputs else ""
        return OperatorRole(None, EPOCH_KEY, ordered_by="ordered submission (epoch e-1 sealed first)",
                            order_key=EPOCH_KEY,
                            external=combine(reads) if reads else None,
                            note=f"Spark job, then votes partition {task.partition!r}{sealed}")

    roles: dict[type, Callable[[Any, Any], OperatorRole]] = {
        OpenEpochOperator: lambda task, dag: OperatorRole(
            LEDGER_ORDER, EPOCH_KEY, ordered_by="the ledger: epoch e opens only after e-1 is sealed",
            note="orders the epochs (tasks between it and the epoch's votes run in epoch order); pushes the "
                 "epoch's context whole"),
        VotePartitionOperator: lambda task, dag: OperatorRole(
            CW, EPOCH_KEY, note=f"votes partition {task.partition!r}: the last vote seals it (unanimous, local)"),
        SparkEpochOperator: spark,
        ArriveAtBarrierOperator: arrive,
        BarrierSensor: lambda task, dag: _barrier_role(dag, task.barrier, "barrier"),
        CloseEpochOperator: lambda task, dag: OperatorRole(
            CW, EPOCH_KEY, note="checks every partition is sealed; the epoch is sealed"),
        SealedPartitionSensor: lambda task, dag: OperatorRole(
            CR, EPOCH_KEY, note=f"waits for the seal of {_partitions(task.partitions)}"),
        FrontierSensor: lambda task, dag: OperatorRole(
            CR, EPOCH_KEY, note="waits for the frontier: the epoch and every earlier one sealed"),
        AcknowledgeEpochOperator: lambda task, dag: OperatorRole(
            CW, note="acknowledgements only move forward (a maximum: confluent)"),
        ReconfigureOperator: lambda task, dag: OperatorRole(
            LEDGER_ORDER, ordered_by="the ledger: a configuration starts at a named, unopened epoch"),
        RollbackOperator: lambda task, dag: OperatorRole(
            LEDGER_ORDER, ordered_by="the ledger: one recorded transaction"),
    }
    try:
        from airflow.providers.standard.operators.empty import EmptyOperator
    except ImportError:  # pragma: no cover - the standard provider ships with Airflow 3
        pass
    else:
        roles[EmptyOperator] = lambda task, dag: OperatorRole(CR, note="does nothing")
    return roles


def _role_of(task: Any, dag: Any, roles: dict[type, Callable[[Any, Any], OperatorRole]]) -> OperatorRole | None:
    for cls in type(task).__mro__:
        if cls in roles:
            return roles[cls](task, dag)
    return None


def _annotation(task: Any) -> dict[str, Any] | None:
    value = getattr(task, LABEL_ATTRIBUTE, None)
    return value if isinstance(value, dict) and value.get("paths") else None


def _ordering(task: Any, role: OperatorRole | None, coordination: str | None,
              region: str | None) -> tuple[str | None, frozenset[str]]:
    """What orders the task's input, and the key it steps through: a declaration first, then the
    operator's own ordering, then ``depends_on_past``, then the epoch order of its region."""
    if coordination == "lock":
        return "a global lock", frozenset()
    if coordination == "order":
        return "declared order", frozenset()
    if role is not None and role.ordered_by:
        return role.ordered_by, role.order_key
    if getattr(task, "depends_on_past", False):
        return "depends_on_past (each run waits for the previous one)", frozenset()
    if region is not None:
        return f"epoch order ({region})", EPOCH_KEY
    return None, frozenset()


def _component(task: Any, dag: Any, roles: dict[type, Callable[[Any, Any], OperatorRole]],
               region: str | None) -> Component:
    """The component of one task: its labels from :func:`blazes_label`, else from the registry, else
    the conservative default; ``region`` is the open task whose epoch order covers it, if any."""
    role = _role_of(task, dag, roles)
    annotation = _annotation(task) or {}
    paths: tuple[PathLabel, ...] | None = None
    if annotation:
        paths = tuple(PathLabel.of(p["kind"], p["gate"], p["name"]) for p in annotation["paths"])
    elif role is not None:
        paths = role.paths
    labelled = paths is not None
    if paths is None:
        paths = (PathLabel("OW", None),)  # the conservative default: order-sensitive, gate unknown
    seals = role.seals if role is not None else None
    if annotation.get("seals") is not None:
        seals = frozenset(annotation["seals"])
    external = role.external if role is not None else None
    if annotation.get("input_seal") is not None:
        external = seal(*annotation["input_seal"])
    coordination = annotation.get("coordination")
    synchronises: Literal["lock", "barrier"] | None = role.synchronises if role is not None else None
    if coordination == "lock":
        synchronises = "lock"
    ordered_by, order_key = _ordering(task, role, coordination, region)
    return Component(task.task_id, paths, labelled=labelled, seals=seals, ordered_by=ordered_by,
                     order_key=order_key, synchronises=synchronises, external=external,
                     kind=type(task).__name__, note=role.note if role is not None else "")


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
    roles = _roles()
    regions = epoch_order_regions(dag)
    components = [_component(task, dag, roles, regions.get(task.task_id)) for task in dag.tasks]
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
