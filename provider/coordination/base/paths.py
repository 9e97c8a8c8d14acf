"""The ZooKeeper layout of one pipeline, in one place: every znode path the package uses is built here.

::

    <root>/<pipeline>                       pipeline record: first and newest epoch, the config index,
                                            compacted-through, the request that created it
        config/v-<version:010d>             config versions (immutable), each naming its first epoch;
                                            numbered by the pipeline record's config index, in the
                                            transaction that extends it (not a ZooKeeper sequence)
        leader                              leadership lease: owner, expiry, request
        frontier                            highest epoch with it and every earlier one sealed
        snapshots/<partition>               the newest two seals of the partition that left snapshots
                                            (with an archive, removed partitions move there)
        requests/<request id>               outcome of a pipeline-level request (rollback, config, ...)
        history                             data: the latest event; children h-<seq>: every state change
        consumers/<id>                      acknowledged epoch of each consumer (backpressure)
        locks/<resource>                    kazoo Lock / ReadLock / WriteLock
        archive                             summary of compacted epochs
        seal-stats/<partition>              recent seal times of the partition's producers (deadlines)
        deadlines/<partition>,<declarer>    a declared deadline of the partition (pipeline or consumer)
        late-alerts/<epoch>,<gen>,<part>    the one alert of a late (epoch, partition) per opening: create-only
        late-alerts/<epoch>,<gen>,<part>,run  ephemeral: the watcher running that alert's callback
        asset-events/<scope>/next-<partition>   next seal to deliver as an asset event (committed once
                                            Airflow stored the event); <epoch>-<gen>-<partition>:
                                            ephemeral claim of the triggerer delivering that seal
        epochs/<epoch:010d>                 epoch record: state, current attempt, owner, config version,
                                            generation
            sealed                          the epoch's seal (create-only: sealed once per generation)
            a-<token:010d>                  one attempt; every vote checks its version (fencing)
                <partition>                 vote counter: its data version counts the votes cast
                    <producer>              one vote (create-only) with its manifest and request id
            g-<generation>                  seal counter: its data version counts sealed partitions
                <partition>                 the partition's seal (create-only)
            b-<generation>/<barrier>        barriers of one opening of the epoch
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from airflow_epochs.coordination.base.names import validate_epoch, validate_name, validate_root

DEFAULT_ROOT = "/airflow-epochs"
__all__ = ["DEFAULT_ROOT", "PipelinePaths", "attempt_key", "child_path", "epoch_key", "parse_attempt_key",
           "validate_root"]


def epoch_key(epoch: int) -> str:
    """Znode name of an epoch: zero-padded so that lexical order is numeric order."""
    return f"{epoch:010d}"


def attempt_key(token: int) -> str:
    """Znode name of an attempt."""
    return f"a-{token:010d}"


def parse_attempt_key(name: str) -> int | None:
    """The token of an attempt znode name, or None if ``name`` is not one."""
    if name.startswith("a-") and name[2:].isdigit():
        return int(name[2:])
    return None


def child_path(parent: str, child: str) -> str:
    """The path of ``child`` (a name read from ZooKeeper) under ``parent``: for walking a subtree."""
    return f"{parent.rstrip('/')}/{child}"


@dataclass(frozen=True)
class PipelinePaths:
    """Paths of one pipeline's subtree; every name is validated on construction."""

    pipeline: str
    root: str = DEFAULT_ROOT

    def __post_init__(self) -> None:
        validate_name("pipeline", self.pipeline)
        validate_root(self.root)

    @property
    def base(self) -> str:
        return f"{self.root}/{self.pipeline}"

    @property
    def config_dir(self) -> str:
        return f"{self.base}/config"

    def config(self, version: int) -> str:
        return f"{self.config_dir}/v-{version:010d}"

    @property
    def leader(self) -> str:
        return f"{self.base}/leader"

    @property
    def frontier(self) -> str:
        return f"{self.base}/frontier"

    @property
    def snapshots(self) -> str:
        return f"{self.base}/snapshots"

    def snapshot_pointer(self, partition: str) -> str:
        return f"{self.snapshots}/{validate_name('partition', partition)}"

    @property
    def requests(self) -> str:
        return f"{self.base}/requests"

    def request(self, request_id: str) -> str:
        return f"{self.requests}/{request_id}"

    @property
    def history(self) -> str:
        return f"{self.base}/history"

    def history_prefix(self) -> str:
        """Prefix of a new sequential history event node."""
        return f"{self.history}/h-"

    def event(self, seq: int) -> str:
        return f"{self.history}/h-{seq:010d}"

    @property
    def consumers(self) -> str:
        return f"{self.base}/consumers"

    def consumer(self, consumer: str) -> str:
        return f"{self.consumers}/{validate_name('consumer', consumer)}"

    @property
    def locks(self) -> str:
        return f"{self.base}/locks"

    def lock(self, resource: str) -> str:
        return f"{self.locks}/{validate_name('resource', resource)}"

    @property
    def archive(self) -> str:
        return f"{self.base}/archive"

    # The folders of the recipe families; each family's records below its folder are built by the family's
    # own paths (``recipes/<family>/paths.py`` or its records module).
    @property
    def seal_stats_dir(self) -> str:
        return f"{self.base}/seal-stats"

    @property
    def deadlines(self) -> str:
        return f"{self.base}/deadlines"

    @property
    def late_alerts(self) -> str:
        return f"{self.base}/late-alerts"

    @property
    def asset_events(self) -> str:
        return f"{self.base}/asset-events"

    @property
    def epochs(self) -> str:
        return f"{self.base}/epochs"

    @lru_cache(maxsize=8192)  # noqa: B019 - instances are frozen values, kept alive by few ledgers
    def epoch(self, epoch: int) -> str:
        return f"{self.epochs}/{epoch_key(validate_epoch(epoch))}"

    def epoch_seal(self, epoch: int) -> str:
        """The epoch's seal: exists exactly while the epoch is sealed (a rollback deletes it)."""
        return f"{self.epoch(epoch)}/sealed"

    @lru_cache(maxsize=8192)  # noqa: B019 - instances are frozen values, kept alive by few ledgers
    def attempt(self, epoch: int, token: int) -> str:
        return f"{self.epoch(epoch)}/{attempt_key(token)}"

    @lru_cache(maxsize=8192)  # noqa: B019 - instances are frozen values, kept alive by few ledgers
    def vote_counter(self, epoch: int, token: int, partition: str) -> str:
        return f"{self.attempt(epoch, token)}/{validate_name('partition', partition)}"

    @lru_cache(maxsize=8192)  # noqa: B019 - instances are frozen values, kept alive by few ledgers
    def vote(self, epoch: int, token: int, partition: str, producer: str) -> str:
        return f"{self.vote_counter(epoch, token, partition)}/{validate_name('producer', producer)}"

    @lru_cache(maxsize=8192)  # noqa: B019 - instances are frozen values, kept alive by few ledgers
    def seals(self, epoch: int, generation: int) -> str:
        """The seal counter of one opening of the epoch; its children are the partitions' seals."""
        return f"{self.epoch(epoch)}/g-{generation}"

    @lru_cache(maxsize=8192)  # noqa: B019 - instances are frozen values, kept alive by few ledgers
    def seal(self, epoch: int, generation: int, partition: str) -> str:
        return f"{self.seals(epoch, generation)}/{validate_name('partition', partition)}"
