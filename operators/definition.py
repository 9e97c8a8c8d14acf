"""The pipeline a DAG defines: partitions, producers, barriers and reads, collected from the tasks of an
:class:`~airflow_epochs.operators.EpochGroup` at parse time.

Each task says what it makes (``partition`` and ``producer``: a Spark job, a vote, a TaskFlow producer),
where it arrives (``barrier`` and ``participant``), and what it reads (``sealed_inputs``, a barrier it
waits for, a partition it publishes). :func:`collect` gathers them into one
:class:`PipelineDefinition`; :func:`check_config` compares a ``config=`` given beside the tasks with it
and names both sides of every difference; :func:`differences` says, in words, how a stored
configuration differs from the DAG's (logged by the open task). No ZooKeeper here: all of this runs
while Airflow parses the DAG file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_epochs.coordination import InvalidConfig, PipelineConfig

__all__ = ["DefinitionMismatch", "PipelineDefinition", "check_config", "collect", "differences", "is_templated"]


class DefinitionMismatch(ValueError):
    """The tasks of an EpochGroup and the ``config=`` given beside them disagree (a DAG import error)."""


def is_templated(value: object) -> bool:
    """Whether a task's name argument is known only when the task runs (a Jinja template, an XComArg)."""
    return not isinstance(value, str) or "{{" in value or "{%" in value


@dataclass
class PipelineDefinition:
    """What the tasks of one EpochGroup declare (task ids are the tasks' full ids).

    :param makes: partition -> producer -> the task that votes as that producer.
    :param arrives: barrier -> participant -> the task that arrives as that participant.
    :param reads: partition -> the tasks that read its seal (sealed inputs, a publish).
    :param waits: barrier -> the tasks that wait for its release.
    :param unknown: tasks whose partition, producer, barrier or participant is templated (known at run time).
    """

    makes: dict[str, dict[str, str]] = field(default_factory=dict)
    arrives: dict[str, dict[str, str]] = field(default_factory=dict)
    reads: dict[str, list[str]] = field(default_factory=dict)
    waits: dict[str, list[str]] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)

    def partitions(self) -> dict[str, list[str]]:
        return {partition: list(producers) for partition, producers in self.makes.items()}

    def barriers(self) -> dict[str, list[str]]:
        return {barrier: list(participants) for barrier, participants in self.arrives.items()}

    def config(self, given: Mapping[str, Any] | None = None) -> PipelineConfig:
        """The pipeline configuration: ``given``'s settings (window, retention, archive, ...), with the
        partitions and barriers the tasks declare where ``given`` names none."""
        data = dict(given or {})
        data.setdefault("partitions", self.partitions())
        if self.arrives:
            data.setdefault("barriers", self.barriers())
        try:
            return PipelineConfig.from_json(data)
        except InvalidConfig as exc:
            raise DefinitionMismatch(f"the pipeline the tasks define is not a valid configuration: {exc}") from None


def _add(table: dict[str, dict[str, str]], name: str, member: str, task_id: str, what: tuple[str, str]) -> None:
    owner = table.setdefault(name, {}).get(member)
    if owner is not None and owner != task_id:
        raise DefinitionMismatch(f"{what[0]} {name!r}: tasks {owner!r} and {task_id!r} both declare {what[1]} "
                                 f"{member!r}; each {what[1]} is one task")
    table[name][member] = task_id


def collect(tasks: Iterable[Any], *, lenient: bool = False) -> PipelineDefinition:
    """The definition the tasks declare.

    :param lenient: a templated name is recorded in ``unknown`` instead of refused (a ``config=`` given
        beside the tasks then says what it is).
    :raises DefinitionMismatch: two tasks declare the same producer or participant, or (not ``lenient``)
        a task's name is templated.
    """
    found = PipelineDefinition()
    for task in tasks:
        task_id = str(task.task_id)
        for kind, value in _declared_names(task):
            if is_templated(value):
                if not lenient:
                    raise DefinitionMismatch(
                        f"task {task_id!r}: its {kind} {value!r} is known only when it runs; inside an EpochGroup "
                        "without config= the tasks define the pipeline, so it must be a plain name (or give "
                        "config=, which then says what it is)")
                found.unknown.append(task_id)
                break
        else:
            _collect_one(task, task_id, found)
    return found


def _declared_names(task: Any) -> list[tuple[str, object]]:
    names: list[tuple[str, object]] = []
    if _makes(task):
        names += [("partition", task.partition), ("producer", task.producer)]
    if _arrives(task):
        names += [("barrier", task.barrier), ("participant", task.participant)]
    for barrier, participant in getattr(task, "stage_arrivals", ()):
        names += [("barrier", barrier), ("participant", participant)]
    return names


def _makes(task: Any) -> bool:
    """A task that votes as a producer of a partition (a Spark job, a vote, a TaskFlow producer)."""
    return hasattr(task, "partition") and hasattr(task, "producer")


def _arrives(task: Any) -> bool:
    """A task that arrives at a barrier as a participant."""
    return hasattr(task, "barrier") and hasattr(task, "participant")


def _collect_one(task: Any, task_id: str, found: PipelineDefinition) -> None:
    if _makes(task):
        _add(found.makes, str(task.partition), str(task.producer), task_id, ("partition", "producer"))
    elif isinstance(getattr(task, "partition", None), str) and not is_templated(task.partition):
        found.reads.setdefault(task.partition, []).append(task_id)  # a publish, a reader of one partition
    if _arrives(task):
        _add(found.arrives, str(task.barrier), str(task.participant), task_id, ("barrier", "participant"))
    for barrier, participant in getattr(task, "stage_arrivals", ()):
        _add(found.arrives, str(barrier), str(participant), task_id, ("barrier", "participant"))
    for partition in (getattr(task, "sealed_inputs", None) or {}).values():
        if not is_templated(partition):
            found.reads.setdefault(str(partition), []).append(task_id)
    waited = [task.barrier] if hasattr(task, "barrier") and not _arrives(task) else []  # a barrier sensor
    for barrier in [*waited, *getattr(task, "stage_waits", ())]:
        if isinstance(barrier, str) and not is_templated(barrier):
            found.waits.setdefault(barrier, []).append(task_id)


def _members(spec: Mapping[str, Any]) -> dict[str, set[str]]:
    return {str(name): {str(m) for m in members} for name, members in spec.items()}


def check_config(found: PipelineDefinition, config: Mapping[str, Any], *, where: str) -> None:
    """What the tasks declare against ``config``'s partitions and barriers: every producer and participant
    of a task must be there (a name changed in one place and not the other is named, with the task on
    one side and the config's entry on the other). Entries of ``config`` that no task declares are
    producers and participants outside this DAG (another DAG, a Spark job, another deployment).

    :param where: who is checked, for the message (``EpochGroup 'epoch' of pipeline 'x'``).
    :raises DefinitionMismatch: they differ.
    """
    problems: list[str] = []
    for kind, member, declared, spec_key in (("partition", "producer", found.makes, "partitions"),
                                             ("barrier", "participant", found.arrives, "barriers")):
        if spec_key not in config:
            continue
        spec = _members(config[spec_key])
        for name, members in sorted(declared.items()):
            if name not in spec:
                problems.append(f"{kind} {name!r} (made by tasks {sorted(members.values())}) is not in config "
                                f"{spec_key} {sorted(spec)}")
                continue
            for m, task_id in sorted(members.items()):
                if m not in spec[name]:
                    problems.append(f"{kind} {name!r}: task {task_id!r} is {member} {m!r}, config {spec_key}"
                                    f"[{name!r}] has {sorted(spec[name])}")
    if problems:
        raise DefinitionMismatch(f"{where}: the tasks and config= disagree: " + "; ".join(problems))


def check_reads(found: PipelineDefinition, config: PipelineConfig, *, where: str) -> None:
    """Every partition a task reads and every barrier a task waits for exists in the pipeline."""
    problems = [f"task {task_id!r} reads partition {partition!r}, which no task makes (partitions: "
                f"{sorted(config.partitions)})"
                for partition, readers in sorted(found.reads.items()) if partition not in config.partitions
                for task_id in readers]
    problems += [f"task {task_id!r} waits for barrier {barrier!r}, at which nobody arrives (barriers: "
                 f"{sorted(config.barriers)})"
                 for barrier, waiters in sorted(found.waits.items()) if barrier not in config.barriers
                 for task_id in waiters]
    if problems:
        raise DefinitionMismatch(f"{where}: " + "; ".join(problems))


def differences(stored: PipelineConfig, defined: PipelineConfig) -> list[str]:
    """How ``defined`` (the DAG's) differs from ``stored`` (ZooKeeper's), one phrase each; empty when the
    same (the order of names does not count)."""
    out: list[str] = []
    for kind, member, old, new in (("partition", "producer", stored.partitions, defined.partitions),
                                   ("barrier", "participant", stored.barriers, defined.barriers)):
        for name in sorted(set(new) - set(old)):
            out.append(f"{kind} {name!r} added (with {member}s {sorted(new[name])})")
        for name in sorted(set(old) - set(new)):
            out.append(f"{kind} {name!r} removed (had {member}s {sorted(old[name])})")
        for name in sorted(set(old) & set(new)):
            added, removed = sorted(set(new[name]) - set(old[name])), sorted(set(old[name]) - set(new[name]))
            if added:
                out.append(f"{kind} {name!r}: {member}s {added} added")
            if removed:
                out.append(f"{kind} {name!r}: {member}s {removed} removed")
    rest_old = {k: v for k, v in stored.to_json().items() if k not in ("partitions", "barriers")}
    rest_new = {k: v for k, v in defined.to_json().items() if k not in ("partitions", "barriers")}
    for key in sorted(set(rest_old) | set(rest_new)):
        if rest_old.get(key) != rest_new.get(key):
            out.append(f"{key} {rest_old.get(key)!r} -> {rest_new.get(key)!r}")
    return out
