"""Barriers inside an epoch, with declared straggler policies (one family).

- :mod:`.barrier`: :class:`Barrier` (declare, register, arrive, wait; the decision and its policy);
- :mod:`.records`: its values (policy, outcome, arrival), refusals, znode records and paths;
- :mod:`~airflow_epochs.coordination.recipes.barriers.watch`: the asynchronous wait for a decision, as a
  trigger runs it.
"""

from airflow_epochs.coordination.recipes.barriers.barrier import (
    MAX_BARRIERS,
    MAX_PARTICIPANTS,
    Barrier,
)
from airflow_epochs.coordination.recipes.barriers.records import (
    MAX_LATE_NAMED,
    Arrival,
    BarrierClosed,
    BarrierConflict,
    BarrierError,
    BarrierFailed,
    BarrierFull,
    BarrierNotDeclared,
    BarrierOutcome,
    BarrierRecord,
    PolicyKind,
    StragglerPolicy,
    UnknownParticipant,
)

__all__ = ["MAX_BARRIERS", "MAX_LATE_NAMED", "MAX_PARTICIPANTS", "Arrival", "Barrier", "BarrierClosed",
           "BarrierConflict", "BarrierError", "BarrierFailed", "BarrierFull", "BarrierNotDeclared", "BarrierOutcome",
           "BarrierRecord", "PolicyKind", "StragglerPolicy", "UnknownParticipant"]
