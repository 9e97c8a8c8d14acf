"""How each task of an Airflow DAG is labelled for the Blazes analysis: the API to label any task
(:func:`blazes_label`), the labels of our own operators and sensors (a registry keyed by class), and the
component a task becomes.

Labels live on the task object (attribute :data:`LABEL_ATTRIBUTE`); Airflow's DAG serialisation drops
such attributes, so the analysis reads DAG files, never the metadata database. Importing this module
imports nothing from Airflow; labelling our operators' tasks does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from airflow_epochs.analysis.labels import ASYNC, PathLabel, StreamLabel, attribute_set, combine, seal
from airflow_epochs.analysis.rules import Component
from airflow_epochs.coordination import InvalidInput

#: the task attribute holding a :func:`blazes_label` annotation (plain JSON-ready data)
LABEL_ATTRIBUTE = "blazes_annotation"
#: the attribute every epoch, partition seal and frontier is keyed by
EPOCH = "epoch"
COORDINATION_KINDS = ("lock", "order")

Labelled = TypeVar("Labelled")


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
    """Annotate a task for :func:`~airflow_epochs.analysis.dag_walk.analyse_dag` (the graybox labels of
    Blazes); returns ``task``.

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


def operator_roles() -> dict[type, Callable[[Any, Any], OperatorRole]]:
    """The labels of our operators and sensors, by class (the most derived class wins)."""
    from airflow_epochs.operators import (
        AcknowledgeEpochOperator,
        ArriveAtBarrierOperator,
        CloseEpochOperator,
        OpenEpochOperator,
        ReconfigureOperator,
        ResealOperator,
        RollbackOperator,
        SparkCorrectionOperator,
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
        ResealOperator: lambda task, dag: OperatorRole(
            LEDGER_ORDER, ordered_by="the ledger: one re-seal of a sealed (epoch, partition) at a time, recorded"),
        SparkCorrectionOperator: lambda task, dag: OperatorRole(
            LEDGER_ORDER, ordered_by="the ledger: a correction's seals are re-produced in plan (epoch) order, a "
                                     "vote out of turn refused", note="Spark jobs, then votes under the new versions"),
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


def component_of(task: Any, dag: Any, roles: dict[type, Callable[[Any, Any], OperatorRole]],
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
