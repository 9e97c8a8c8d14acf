"""The labels of Blazes coordination analysis: path labels, stream labels, and how a stream's label
passes through a path and merges with others.

After Alvaro, Conway, Hellerstein and Maier, *Blazes: Coordination analysis and placement for
distributed programs* (ICDE 2014, TODS 2017). Pure functions over a small graph model; no Airflow
and no ZooKeeper here (the rules that decide coordination are :mod:`airflow_epochs.analysis.rules`, the
Airflow DAG walker :mod:`airflow_epochs.analysis.dag_walk`).

Graybox annotations. Each path through a component (input to output) is labelled:

==========  ===============================================================================
``CR``      confluent and stateless: the same outputs whatever the input order
``CW``      confluent and stateful: its state depends on the input contents, not their order
``OR[G]``   order-sensitive and stateless; order matters only within groups of the gate ``G``
``OW[G]``   order-sensitive and stateful, gated on ``G``
==========  ===============================================================================

A gate is a set of attribute names (``{"carrier", "day"}``); an empty gate means order matters over
the whole stream; an unknown gate (``None``, used for unlabelled components) is order-sensitive on
something we cannot name, so only a total order satisfies it.

Stream labels. A stream carries one severity, weakest first:

- ``Async``: deterministic contents, delivered in any order;
- ``NDRead[G]``: contents that may differ from run to run (reads of a changing state through an
  order-sensitive, stateless path gated on ``G``);
- ``Taint``: contents that may stay different for good (a stateful order-sensitive path consumed
  an unordered stream, or a stateful path stored nondeterministic reads).

and, independently, may be *sealed* on a key ``K`` (``Seal[K]``): punctuated, so that a reader learns
when every record of a given value of ``K`` has arrived.

Transfer through a path (the paper's reduction rules, with ``ordered`` meaning the component's input
is delivered in one total order by some coordination):

=================  ===================================  ================================
input              path                                 output
=================  ===================================  ================================
``Taint``          any                                  ``Taint``
``NDRead[G]``      ``CR`` / ``OR[H]``                   ``NDRead[G+H]``
``NDRead[G]``      ``CW`` / ``OW[H]``                   ``Taint``
``Async``          ``CR`` / ``CW``                      ``Async`` (a seal passes through)
``Seal[K]``        ``OR[G]`` / ``OW[G]``, ``K`` in G    ``Async`` (deterministic contents)
anything ordered   ``OR`` / ``OW``                      ``Async``
``Async``          ``OR[G]``                            ``NDRead[G]``
``Async``          ``OW[G]``                            ``Taint``
=================  ===================================  ================================

A component that produces or observes punctuation (a vote, a sensor on a seal) then seals its output
on its key; sealing keeps the severity (sealing nondeterministic contents fixes nothing). Data a
component reads from outside the dataflow is merged into its input; an ordering of the dataflow
covers it only if it arrives complete at each ordered step (sealed on the key the ordering steps by).

Merging, where several streams feed one component: the most severe label wins (``Taint`` dominates,
``Async`` is the weakest); the merged stream is sealed only if every contributor is, on the union of
their keys (a group of that union is complete once each contributor has sealed it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from airflow_epochs.coordination.base.errors import InvalidInput

PathKind = Literal["CR", "CW", "OR", "OW"]
Severity = Literal["Async", "NDRead", "Taint"]

PATH_KINDS: tuple[PathKind, ...] = ("CR", "CW", "OR", "OW")
_RANK: dict[Severity, int] = {"Async": 0, "NDRead": 1, "Taint": 2}


def key_text(key: Iterable[str]) -> str:
    return ", ".join(sorted(key))


def attribute_set(what: str, value: Iterable[str] | str | None) -> frozenset[str] | None:
    """A validated set of attribute names (``None`` stays ``None``).

    :raises InvalidInput: a name is empty, not a string, or holds characters other than letters,
        digits, ``_``, ``.`` and ``-``; or ``value`` is a bare string (a likely mistake for a tuple).
    """
    if value is None:
        return None
    if isinstance(value, str):
        raise InvalidInput(f"{what} must be a sequence of attribute names, not the string {value!r} "
                           f"(write ({value!r},) for one attribute)")
    names = list(value)
    for name in names:
        if not isinstance(name, str) or not name or not all(ch.isalnum() or ch in "_.-" for ch in name):
            raise InvalidInput(f"{what} holds an invalid attribute name {name!r}")
    return frozenset(names)


@dataclass(frozen=True)
class PathLabel:
    """The annotation of one path through a component.

    :param kind: ``CR``, ``CW``, ``OR`` or ``OW``.
    :param gate: for ``OR``/``OW``, the attributes within whose groups order matters (``None``:
        unknown, satisfied only by a total order); must be ``None`` for ``CR``/``CW``.
    :param name: the path's name when a component has several (e.g. ``"totals"``).
    """

    kind: PathKind
    gate: frozenset[str] | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if self.kind not in PATH_KINDS:
            raise InvalidInput(f"path label must be one of {', '.join(PATH_KINDS)}, not {self.kind!r}")
        if not self.order_sensitive and self.gate is not None:
            raise InvalidInput(f"a {self.kind} path is confluent and takes no gate (got {sorted(self.gate)})")

    @classmethod
    def of(cls, kind: str, gate: Iterable[str] | str | None = None, name: str = "") -> PathLabel:
        """Build a label from plain values, validating them (``gate`` may be any iterable of names)."""
        if kind not in PATH_KINDS:
            raise InvalidInput(f"path label must be one of {', '.join(PATH_KINDS)}, not {kind!r}")
        return cls(kind, attribute_set("gate", gate), name)

    @property
    def order_sensitive(self) -> bool:
        return self.kind in ("OR", "OW")

    @property
    def stateful(self) -> bool:
        return self.kind in ("CW", "OW")

    def __str__(self) -> str:
        if not self.order_sensitive:
            return self.kind
        return f"{self.kind}[{'?' if self.gate is None else key_text(self.gate)}]"


@dataclass(frozen=True)
class StreamLabel:
    """What is known about a stream: its severity and, optionally, the key it is sealed on.

    :param severity: ``Async``, ``NDRead`` or ``Taint``.
    :param seal: attributes the stream is punctuated on (``None``: not sealed).
    :param gate: for ``NDRead``, the gate of the order-sensitive reads that produced it.
    """

    severity: Severity = "Async"
    seal: frozenset[str] | None = None
    gate: frozenset[str] = frozenset()

    @property
    def deterministic(self) -> bool:
        """Same contents in every run (the order may still differ)."""
        return self.severity == "Async"

    def sealed_on(self, key: Iterable[str] | None) -> StreamLabel:
        """This stream punctuated on ``key`` (``None`` removes the seal)."""
        return replace(self, seal=None if key is None else frozenset(key))

    def __str__(self) -> str:
        if self.severity == "Taint":
            return "Taint"
        text = "Async" if self.severity == "Async" else f"NDRead[{key_text(self.gate)}]"
        if self.seal is None:
            return text
        sealed = f"Seal[{key_text(self.seal)}]"
        return sealed if self.severity == "Async" else f"{text} {sealed}"


ASYNC = StreamLabel("Async")
TAINT = StreamLabel("Taint")


def seal(*key: str) -> StreamLabel:
    """A deterministic stream sealed on ``key``: ``seal("batch")`` is ``Seal[batch]``."""
    return StreamLabel("Async", attribute_set("seal key", key))


def combine(labels: Iterable[StreamLabel]) -> StreamLabel:
    """The label of a stream fed by all of ``labels`` (the merge rule; see the module docstring).

    :raises InvalidInput: no label given.
    """
    items = list(labels)
    if not items:
        raise InvalidInput("combine() needs at least one stream label")
    severity = max((item.severity for item in items), key=_RANK.__getitem__)
    gate = frozenset().union(*(item.gate for item in items if item.severity == "NDRead")) \
        if severity == "NDRead" else frozenset()
    seals = [item.seal for item in items]
    key = None if any(s is None for s in seals) else frozenset().union(*(s for s in seals if s is not None))
    return StreamLabel(severity, None if severity == "Taint" else key, gate)


def compatible(sealed: frozenset[str] | None, gate: frozenset[str] | None) -> bool:
    """Whether a seal on ``sealed`` lets a path gated on ``gate`` run without ordering: every group
    of the gate then lies inside one sealed partition, i.e. the key is contained in the gate."""
    return sealed is not None and gate is not None and sealed <= gate


def transfer(stream: StreamLabel, path: PathLabel, *, ordered: bool = False) -> StreamLabel:
    """The label of ``path``'s output for an input labelled ``stream`` (the reduction rules).

    :param ordered: the component's input is delivered in one total order (coordination present).
    """
    if stream.severity == "Taint":
        return TAINT
    if stream.severity == "NDRead":
        if path.stateful:
            return TAINT
        extra = path.gate or frozenset()
        return replace(stream, gate=stream.gate | extra, seal=stream.seal if not path.order_sensitive else None)
    if not path.order_sensitive:
        return stream
    if ordered or compatible(stream.seal, path.gate):
        return ASYNC
    if path.kind == "OR":
        return StreamLabel("NDRead", None, path.gate or frozenset())
    return TAINT
