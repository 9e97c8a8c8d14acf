"""Leadership of a pipeline across deployments: a renewable lease with an owner and an expiry.

Airflow tasks are short-lived processes, so an ephemeral znode (kazoo's Election or Lock) would be
lost between the tasks of one epoch. Leadership is therefore kazoo's :class:`NonBlockingLease`: the
holder renews it from each task; when it stops renewing, the lease expires and a standby takes it.
The lease compares wall clocks of the contenders (kazoo stores the expiry), so keep clocks in sync
and durations well above the skew; seals never depend on it, because attempts carry fencing tokens
that ZooKeeper orders.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.recipe.lease import NonBlockingLease

from airflow_epochs.coordination.errors import InvalidInput, NotLeader
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.names import validate_name
from airflow_epochs.coordination.paths import DEFAULT_ROOT, PipelinePaths
from airflow_epochs.coordination.session import Session

_HOLDER = "lease_holder"  # the child kazoo's NonBlockingLease keeps its holder record in


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds the lease, and until when (UTC, as kazoo records it)."""

    owner: str
    until: datetime.datetime


class LeaderLease:
    """The leadership lease of one pipeline.

    :param client: a started kazoo client.
    :param pipeline: the pipeline name.
    :param owner: this contender's identity (e.g. the Airflow deployment's name).
    :param duration: how long one acquisition lasts without renewal; a standby takes over after it.
    :param root: the znode under which pipelines live.
    """

    def __init__(
        self,
        client: KazooClient,
        pipeline: str,
        *,
        owner: str,
        duration: datetime.timedelta = datetime.timedelta(seconds=60),
        root: str = DEFAULT_ROOT,
    ) -> None:
        self.paths = PipelinePaths(pipeline, root)
        self.owner = validate_name("owner", owner)
        if not isinstance(duration, datetime.timedelta) or duration.total_seconds() < 1:
            raise InvalidInput(f"lease duration must be a timedelta of at least 1 s, not {duration!r}")
        self.duration = duration
        self.client = client
        self.session = Session.of(client)
        self._ledger = EpochLedger(client, pipeline, owner=self.owner, root=root)
        self._lost_count: int | None = None

    def holder(self) -> LeaseHolder | None:
        """The recorded holder (it may have expired), or None."""
        raw = self.session.call(lambda: self.session.get(f"{self.paths.leader}/{_HOLDER}"), what="read leader")
        if raw is None:
            return None
        data: dict[str, Any] = json.loads(raw[0])
        until = datetime.datetime.strptime(data["end"], "%Y-%m-%dT%H:%M:%S")
        return LeaseHolder(str(data["holder"]), until)

    def acquire(self) -> LeaseHolder:
        """Obtain or renew the lease; raise :class:`NotLeader` naming the holder if another owns it.

        A change of holder is recorded in the pipeline's history.
        """
        before = self.holder()

        def take() -> bool:
            self.client.ensure_path(self.paths.leader)
            return bool(NonBlockingLease(self.client, self.paths.leader, self.duration, identifier=self.owner,
                                         utcnow=_utcnow))

        if not self.session.call(take, what=f"acquire leadership of {self.paths.pipeline!r}"):
            current = self.holder()
            raise NotLeader(
                f"pipeline {self.paths.pipeline!r} is led by {current.owner if current else '?'!r} until "
                f"{current.until.isoformat() if current else '?'} UTC; {self.owner!r} is a standby",
                holder=current.owner if current else None,
            )
        self._lost_count = self.session.lost_count
        if before is None or before.owner != self.owner:
            self._ledger.record("leader_changed", owner=self.owner,
                                previous=before.owner if before else None)
        now = self.holder()
        assert now is not None
        return now

    def is_held(self) -> bool:
        """Whether this owner holds an unexpired lease, and no session loss happened since acquiring."""
        if self._lost_count is not None and self.session.lost_count != self._lost_count:
            return False
        current = self.holder()
        return current is not None and current.owner == self.owner and current.until > _utcnow()

    def release(self) -> bool:
        """Give the lease up early (only if this owner holds it); returns whether it did."""
        path = f"{self.paths.leader}/{_HOLDER}"

        def drop() -> bool:
            raw = self.session.get(path)
            if raw is None or json.loads(raw[0]).get("holder") != self.owner:
                return False
            from kazoo.exceptions import BadVersionError, NoNodeError

            try:
                self.client.delete(path, version=raw[1].version)
            except (BadVersionError, NoNodeError):
                return False
            return True

        released = self.session.call(drop, what="release leadership")
        if released:
            self._ledger.record("leader_released", owner=self.owner)
        return released


def _utcnow() -> datetime.datetime:
    # kazoo compares naive UTC datetimes; datetime.utcnow() is deprecated, so build the same value.
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
