"""Blazes coordination selection over a dataflow: where is coordination needed, and which kind.

After Alvaro, Conway, Hellerstein and Maier, *Blazes* (ICDE 2014, TODS 2017). Pure functions over a
small graph of components; the labels and how they pass through a path are
:mod:`airflow_epochs.analysis.labels`.

Coordination selection: a confluent path needs none; an order-sensitive path whose input is sealed on
a key contained in its gate needs the seal only; one whose input is not sealed at all needs a seal on
a key within its gate (reported missing unless something orders it); one whose input is sealed on a
key its gate does not contain, or whose gate is empty or unknown, needs global order. A lock or
barrier whose input is already sealed on a key that meets every need it serves is over-coordination.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_epochs.analysis.labels import (
    ASYNC,
    PathLabel,
    StreamLabel,
    combine,
    compatible,
    key_text,
    transfer,
)
from airflow_epochs.coordination.base.errors import InvalidInput

Need = Literal["none", "seal", "order"]
Status = Literal["not needed", "present", "missing"]


@dataclass(frozen=True)
class Component:
    """One node of the dataflow.

    :param name: unique name (a task id).
    :param paths: its annotated paths (at least one).
    :param labelled: whether the labels came from an annotation (False: the conservative default).
    :param seals: the component punctuates its output on this key (a vote, a sensor on a seal).
    :param ordered_by: what delivers its input in one total order, if anything does (a lock, the
        epoch order, a ledger transaction).
    :param order_key: the attributes whose values that ordering hands the component one at a time
        (``{"epoch"}`` for epochs run in order); external input sealed on them arrives complete
        at each step, so the ordering covers it too.
    :param synchronises: ``"lock"`` or ``"barrier"`` when the component is itself such a mechanism;
        these are checked for over-coordination.
    :param source: the label of its input when no other component feeds it (default: the
        analysis's ``source``).
    :param external: the label of data it reads from outside the dataflow, merged into its input;
        its ordering covers that data only when it is sealed on (part of) ``order_key``.
    :param kind: free text, e.g. the operator's class name.
    :param note: free text shown beside the verdict.
    """

    name: str
    paths: tuple[PathLabel, ...]
    labelled: bool = True
    seals: frozenset[str] | None = None
    ordered_by: str | None = None
    order_key: frozenset[str] = frozenset()
    synchronises: Literal["lock", "barrier"] | None = None
    source: StreamLabel | None = None
    external: StreamLabel | None = None
    kind: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidInput("a component needs a non-empty name")
        if not self.paths:
            raise InvalidInput(f"component {self.name!r} needs at least one path label")
        if self.synchronises not in (None, "lock", "barrier"):
            raise InvalidInput(f"component {self.name!r}: synchronises must be 'lock' or 'barrier', "
                               f"not {self.synchronises!r}")

    @property
    def label_text(self) -> str:
        """``OR[epoch, word]``, several paths with their names, ``+Seal[K]`` when it seals."""
        parts = [f"{p}({p.name})" if p.name and len(self.paths) > 1 else str(p) for p in self.paths]
        text = " ".join(parts)
        if self.seals is not None:
            text += f" +Seal[{key_text(self.seals)}]"
        return text if self.labelled else f"{text} (unlabelled)"


@dataclass(frozen=True)
class PathVerdict:
    """The coordination one path needs, and whether it has it.

    :param need: ``none`` (confluent), ``seal`` (a seal on ``key`` suffices) or ``order``.
    :param key: the seal key that suffices (present or suggested), for ``need == "seal"``.
    :param status: ``not needed``, ``present`` or ``missing``.
    :param by: when present through an ordering rather than a seal, the ordering's name.
    """

    path: PathLabel
    need: Need
    key: frozenset[str] | None
    status: Status
    by: str
    output: StreamLabel

    @property
    def text(self) -> str:
        if self.need == "none":
            return "no coordination"
        head = f"seal on {key_text(self.key or ())}" if self.need == "seal" else "global order"
        if self.status == "missing":
            return f"{head}: MISSING"
        if not self.by:
            return f"{head}: present"
        if self.need == "seal":
            return f"global order: present ({self.by}), where a {head} would do"
        return f"{head}: present ({self.by})"


@dataclass(frozen=True)
class Finding:
    """An under- or over-coordination finding about one component."""

    component: str
    message: str
    missing: str = ""


@dataclass(frozen=True)
class ComponentReport:
    """A component with its input and output labels and its paths' verdicts."""

    component: Component
    upstream: tuple[str, ...]
    input: StreamLabel
    output: StreamLabel
    paths: tuple[PathVerdict, ...]

    @property
    def name(self) -> str:
        return self.component.name

    @property
    def verdict(self) -> str:
        needing = [p for p in self.paths if p.need != "none"]
        if not needing:
            return "no coordination"
        missing = [p for p in needing if p.status == "missing"]
        shown = missing or needing
        return "; ".join(dict.fromkeys(p.text for p in shown))


@dataclass(frozen=True)
class Analysis:
    """The outcome of :func:`analyse` over a whole dataflow."""

    components: tuple[ComponentReport, ...]
    edges: tuple[tuple[str, str, StreamLabel], ...]
    output: StreamLabel
    under: tuple[Finding, ...] = field(default_factory=tuple)
    over: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def unlabelled(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.components if not c.component.labelled)

    def report(self, name: str) -> ComponentReport:
        """The report of component ``name``.

        :raises KeyError: no such component.
        """
        for item in self.components:
            if item.name == name:
                return item
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dictionary of the whole analysis."""
        return {
            "output": str(self.output),
            "components": [
                {
                    "name": c.name,
                    "kind": c.component.kind,
                    "labelled": c.component.labelled,
                    "label": c.component.label_text,
                    "upstream": list(c.upstream),
                    "input": str(c.input),
                    "output": str(c.output),
                    "verdict": c.verdict,
                    "ordered_by": c.component.ordered_by,
                    "order_key": sorted(c.component.order_key),
                    "external": None if c.component.external is None else str(c.component.external),
                    "seals": None if c.component.seals is None else sorted(c.component.seals),
                    "note": c.component.note,
                    "paths": [
                        {"name": p.path.name, "label": str(p.path), "need": p.need,
                         "key": None if p.key is None else sorted(p.key), "status": p.status, "by": p.by,
                         "output": str(p.output)}
                        for p in c.paths
                    ],
                }
                for c in self.components
            ],
            "edges": [{"from": a, "to": b, "label": str(label)} for a, b, label in self.edges],
            "under_coordination": [{"component": f.component, "message": f.message, "missing": f.missing}
                                   for f in self.under],
            "over_coordination": [{"component": f.component, "message": f.message} for f in self.over],
            "unlabelled": list(self.unlabelled),
        }


def _topological(names: Sequence[str], edges: Sequence[tuple[str, str]]) -> list[str]:
    incoming: dict[str, int] = dict.fromkeys(names, 0)
    following: dict[str, list[str]] = {name: [] for name in names}
    for a, b in edges:
        incoming[b] += 1
        following[a].append(b)
    ready = [name for name in names if incoming[name] == 0]
    ordered: list[str] = []
    while ready:
        name = ready.pop(0)
        ordered.append(name)
        for nxt in following[name]:
            incoming[nxt] -= 1
            if incoming[nxt] == 0:
                ready.append(nxt)
    if len(ordered) != len(names):
        stuck = sorted(name for name in names if incoming[name] > 0)
        raise InvalidInput(f"the dataflow has a cycle through {stuck}")
    return ordered


def suggested_seal(gate: frozenset[str], preferred: Iterable[str]) -> frozenset[str]:
    """The seal key to propose for a path gated on ``gate`` (non-empty): the preferred attributes in
    the gate (the ones the platform seals on), else the gate itself."""
    return (gate & frozenset(preferred)) or gate


def _covered_by_order(component: Component, path: PathLabel) -> bool:
    """Whether the component's ordering covers this path. Data read from outside the dataflow is not
    ordered by it: it must arrive complete at each ordered step (sealed on part of the order key) or
    be sealed on a key that fits the gate."""
    if component.ordered_by is None:
        return False
    external = component.external
    if external is None:
        return True
    return external.deterministic and external.seal is not None and (
        external.seal <= component.order_key or compatible(external.seal, path.gate))


def _path_verdict(component: Component, path: PathLabel, stream: StreamLabel,
                  preferred: Iterable[str]) -> PathVerdict:
    ordered = _covered_by_order(component, path)
    output = transfer(stream, path, ordered=ordered)
    if not path.order_sensitive:
        return PathVerdict(path, "none", None, "not needed", "", output)
    if path.gate is not None and compatible(stream.seal, path.gate):
        key = stream.seal or frozenset()
        return PathVerdict(path, "seal", key, "present", "", output)
    if path.gate and stream.seal is None:  # unsealed input, known gate: a seal inside the gate would do
        key = suggested_seal(path.gate, preferred)
        if ordered:
            return PathVerdict(path, "seal", key, "present", str(component.ordered_by), output)
        return PathVerdict(path, "seal", key, "missing", "", output)
    if ordered:
        return PathVerdict(path, "order", None, "present", str(component.ordered_by), output)
    return PathVerdict(path, "order", None, "missing", "", output)


def _under(component: Component, verdict: PathVerdict, stream: StreamLabel, upstream: Sequence[str]) -> Finding:
    path = f"path {verdict.path.name!r} " if verdict.path.name else ""
    what = f"{component.name!r} ({path}{verdict.path})"
    fed = f"{stream} input" + (f" from {', '.join(repr(u) for u in upstream)}" if upstream else "")
    if component.ordered_by is None:
        unordered = "and nothing orders it"
    else:
        unordered = f"and {component.ordered_by} does not cover its external input ({component.external})"
    if verdict.need == "seal":
        key = key_text(verdict.key or ())
        missing = f"Seal[{key}]"
        message = (f"{what} is order-sensitive but reads unsealed {fed} {unordered}: missing {missing}; seal its "
                   f"input on {key}, else its output is {verdict.output}")
        return Finding(component.name, message, missing)
    if verdict.path.gate is None:
        reason = "its gate is unknown: it is unlabelled"
    elif not verdict.path.gate:
        reason = "its gate is empty: order matters over the whole stream"
    else:
        reason = (f"its input's Seal[{key_text(stream.seal or ())}] does not cover its gate "
                  f"[{key_text(verdict.path.gate)}]")
    message = (f"{what} needs global order ({reason}) but reads {fed} {unordered}: missing global order, else "
               f"its output is {verdict.output}")
    return Finding(component.name, message, "global order")


def _over(component: Component, stream: StreamLabel, verdicts: Sequence[PathVerdict]) -> Finding | None:
    """A lock or barrier is over-coordination when its input is already sealed on a key that meets
    every need of its own paths and covers the seal it provides downstream."""
    if component.synchronises is None or stream.seal is None or not stream.deterministic:
        return None
    for verdict in verdicts:
        if verdict.path.order_sensitive and not compatible(stream.seal, verdict.path.gate):
            return None
    if component.seals is not None and not stream.seal <= component.seals:
        return None
    sealed = f"Seal[{key_text(stream.seal)}]"
    if component.synchronises == "barrier":
        message = (f"{component.name!r} is a barrier, but its input is already {sealed}, all the barrier "
                   f"provides: waiting for the seal gives the same guarantee without synchronising "
                   f"the participants")
    else:
        needs = [str(v.path) for v in verdicts if v.path.order_sensitive]
        fits = f"fits the gate of {', '.join(needs)}" if needs else "is more than its confluent paths need"
        message = (f"{component.name!r} takes a global lock, but its input is already {sealed}, which {fits}: "
                   f"the seal suffices and the lock only serialises")
    return Finding(component.name, message)


def analyse(components: Iterable[Component], edges: Iterable[tuple[str, str]], *,
            source: StreamLabel = ASYNC, preferred_keys: Iterable[str] = ()) -> Analysis:
    """Label every stream of the dataflow and decide each path's coordination.

    :param components: the nodes; names must be unique.
    :param edges: ``(upstream, downstream)`` pairs; the graph must be acyclic.
    :param source: the label of the input of components nobody feeds (unless they set their own).
    :param preferred_keys: attributes the platform can seal on, proposed first when a seal is missing.
    :raises InvalidInput: duplicate names, an edge naming an unknown component, or a cycle.
    """
    nodes: dict[str, Component] = {}
    for component in components:
        if component.name in nodes:
            raise InvalidInput(f"two components are named {component.name!r}")
        nodes[component.name] = component
    pairs = list(dict.fromkeys(edges))
    for a, b in pairs:
        for end in (a, b):
            if end not in nodes:
                raise InvalidInput(f"edge {a!r} -> {b!r} names an unknown component {end!r}")
    preferred = tuple(preferred_keys)
    upstream: Mapping[str, list[str]] = {name: [a for a, b in pairs if b == name] for name in nodes}
    outputs: dict[str, StreamLabel] = {}
    reports: dict[str, ComponentReport] = {}
    under: list[Finding] = []
    over: list[Finding] = []
    order = _topological(list(nodes), pairs)
    for name in order:
        component = nodes[name]
        feeders = upstream[name]
        reads = [outputs[u] for u in feeders] + ([component.external] if component.external else [])
        stream = combine(reads) if reads else (component.source or source)
        verdicts = tuple(_path_verdict(component, path, stream, preferred) for path in component.paths)
        produced = combine(v.output for v in verdicts)
        if component.seals is not None and produced.severity != "Taint":
            produced = produced.sealed_on(component.seals)
        outputs[name] = produced
        reports[name] = ComponentReport(component, tuple(feeders), stream, produced, verdicts)
        under.extend(_under(component, v, stream, feeders) for v in verdicts if v.status == "missing")
        finding = _over(component, stream, verdicts)
        if finding is not None:
            over.append(finding)
    sinks = [name for name in order if not any(a == name for a, _ in pairs)]
    return Analysis(
        components=tuple(reports[name] for name in order),
        edges=tuple((a, b, outputs[a]) for a, b in pairs),
        output=combine(outputs[name] for name in sinks) if sinks else source,
        under=tuple(under),
        over=tuple(over),
    )
