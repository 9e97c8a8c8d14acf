"""Leadership of a pipeline across deployments: a renewable lease with an owner and an expiry.

Airflow tasks are short-lived processes, so an ephemeral znode (kazoo's Election or Lock) would be
lost between the tasks of one epoch. Leadership is therefore a lease: one znode naming the holder and
the wall-clock time it expires; the holder renews it from each task, and when it stops renewing, a
standby takes it. Every change is a version-checked transaction carrying a request id (so a lost
answer is resolved by reading the lease) and, when the holder changes, its history record. The
lease compares the contenders' wall clocks: keep them in sync and durations well above the skew;
seals never depend on it, because attempts carry fencing tokens that ZooKeeper orders.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field, replace

from airflow_epochs.coordination.base.call import Call, Conflict
from airflow_epochs.coordination.base.errors import InvalidInput, NotLeader, PipelineNotFound
from airflow_epochs.coordination.base.steps import Create, SetData, Step
from airflow_epochs.coordination.base.znode import Found
from airflow_epochs.coordination.recipes.leadership.records import Holding, LeaseNode
from airflow_epochs.coordination.state.pipeline import PipelineContext
from airflow_epochs.coordination.wire.events import LeaderChanged, LeaderReleased
from airflow_epochs.coordination.wire.records import Overtaken


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds the lease, since when and until when (timezone-aware UTC)."""

    owner: str
    until: datetime.datetime
    since: datetime.datetime
    #: set when a repeated acquisition finds it committed but the lease passed to another owner since
    overtaken: Overtaken | None = field(default=None, compare=False)

    def remaining(self, now: float | None = None) -> float:
        """Seconds until the lease expires (negative once expired)."""
        return self.until.timestamp() - (time.time() if now is None else now)


def _utc(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)


_RECENT_HOLDINGS = 16
"""How many earlier holdings (owner, request, released) a lease record keeps, so that a request whose answer
was lost is still found after that many renewals or takeovers (the outcome table, docs: reference/outcomes)."""


class LeaderLease:
    """The leadership lease of one pipeline, contended for as the context's owner. Bound to a ledger as
    ``ledger.lease(owner=..., duration=...)``.

    :param ctx: the pipeline's context; its owner is this contender's identity (e.g. the Airflow
        deployment's name) and its clock computes the expiry.
    :param duration: how long one acquisition lasts without renewal; a standby takes over after it.
    """

    def __init__(self, ctx: PipelineContext, *, duration: datetime.timedelta = datetime.timedelta(seconds=60)) -> None:
        if not isinstance(duration, datetime.timedelta) or duration.total_seconds() < 1:
            raise InvalidInput(f"lease duration must be a timedelta of at least 1 s, not {duration!r}")
        self.ctx = ctx
        self.owner = self.ctx.owner
        self.duration = duration
        self.session = self.ctx.session
        self._session_id: int | None = None

    def _read(self, call: Call) -> Found[LeaseNode] | None:
        raw = call.get(self.ctx.paths.leader)
        return None if raw is None else Found(LeaseNode.from_bytes(raw.data, path=self.ctx.paths.leader), raw.stat)

    @staticmethod
    def _holder(lease: LeaseNode) -> LeaseHolder:
        return LeaseHolder(lease.owner, _utc(lease.until), _utc(lease.since))

    def holder(self) -> LeaseHolder | None:
        """The recorded holder (it may have expired), or None."""

        def run(call: Call) -> LeaseHolder | None:
            found = self._read(call)
            return None if found is None else self._holder(found.record)

        return self.ctx.call(run, what=f"read the leader of {self.ctx.pipeline!r}")

    def acquire(self, *, request_id: str | None = None) -> LeaseHolder:
        """Obtain or renew the lease; raise :class:`NotLeader` naming the holder if another owns it.

        A change of holder is recorded in the pipeline's history, in the same transaction.
        """
        path = self.ctx.paths.leader

        def body(call: Call) -> LeaseHolder:
            found = self._read(call)
            now = self.ctx.clock()
            lease = LeaseNode(self.owner, now + self.duration.total_seconds(), now, call.request_id)
            ops: list[Step]
            if found is None and call.exists(self.ctx.paths.base) is None:
                raise PipelineNotFound(f"pipeline {self.ctx.pipeline!r} does not exist under {self.ctx.paths.root}; "
                                       "nothing was written")
            if found is None:
                ops = [Create(path, lease.to_bytes()),
                       *self.ctx.event(LeaderChanged(owner=self.owner, previous=None))]
            else:
                current, stat = found
                if current.owner != self.owner and current.until > now:
                    raise NotLeader(
                        f"pipeline {self.ctx.pipeline!r} is led by {current.owner!r} until "
                        f"{_utc(current.until).isoformat()}; {self.owner!r} is a standby",
                        holder=current.owner,
                    )
                renewing = current.owner == self.owner and not current.released
                # the requests that held it before stay findable by their owners (renewals included)
                lease = replace(lease, since=current.since if renewing else now,
                                recent=(current.holding(), *current.recent)[:_RECENT_HOLDINGS])
                ops = [SetData(path, lease.to_bytes(), stat.version)]
                if not renewing:
                    ops += self.ctx.event(LeaderChanged(owner=self.owner, previous=current.owner))
            if call.try_commit(ops) is not None:
                raise Conflict()  # another contender wrote first: read again
            return self._holder(lease)

        def find(call: Call) -> LeaseHolder | None:
            found = self._read(call)
            if found is None:
                return None
            lease = found.record
            if lease.owner == self.owner and lease.request == call.request_id:
                return self._holder(lease)
            if self._was_mine(lease, call.request_id) is not None:
                if lease.owner == self.owner and not lease.released:
                    return self._holder(lease)  # an earlier renewal of the holding this owner still has
                return replace(self._holder(lease), owner=self.owner, overtaken=Overtaken("taken_over", lease.owner))
            return None

        holder = self.ctx.call(body, what=f"acquire leadership of {self.ctx.pipeline!r}", request_id=request_id,
                               find=find)
        self._session_id = self.session.session_id
        return holder

    def _was_mine(self, lease: LeaseNode, request_id: str) -> Holding | None:
        """This owner's earlier holding by ``request_id`` among the lease's recent holdings, if any."""
        for held in lease.recent:
            if held.owner == self.owner and held.request == request_id:
                return held
        return None

    def is_held(self) -> bool:
        """Whether this owner holds an unexpired lease, and its session has not expired since acquiring."""
        if self._session_id is not None:
            try:
                self.session.ensure_session_alive(self._session_id, "the leadership")
            except Exception:  # noqa: BLE001 - SessionLost: not held
                return False
        current = self.holder()
        return current is not None and current.owner == self.owner and current.remaining() > 0

    def release(self, *, request_id: str | None = None) -> bool:
        """Give the lease up early (only if this owner holds it); returns whether it did."""
        path = self.ctx.paths.leader

        def body(call: Call) -> bool:
            found = self._read(call)
            if found is None or found.record.owner != self.owner or found.record.released:
                return False
            released = replace(found.record, until=self.ctx.clock(), released=True, request=call.request_id)
            failure = call.try_commit([SetData(path, released.to_bytes(), found.stat.version),
                                       *self.ctx.event(LeaderReleased(owner=self.owner))])
            if failure is not None:
                raise Conflict()
            return True

        def find(call: Call) -> bool | None:
            found = self._read(call)
            if found is None:
                return None
            lease = found.record
            if lease.released and lease.request == call.request_id:
                return True
            held = self._was_mine(lease, call.request_id)
            return True if held is not None and held.released else None

        return self.ctx.call(body, what=f"release leadership of {self.ctx.pipeline!r}", request_id=request_id,
                             find=find)
