"""SealedPartitionEventTrigger: turns seals written anywhere (a Spark job, another deployment) into
Airflow asset events, for an ``AssetWatcher``; one event per seal even if the trigger runs twice."""

from __future__ import annotations

from typing import Any

from airflow.triggers.base import BaseEventTrigger
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from airflow_epochs.coordination import DEFAULT_ROOT, PipelinePaths, validate_epoch, validate_name
from airflow_epochs.triggers.base import Wake, ZooKeeperWatchTrigger
from airflow_epochs.triggers.seals import read_seals


class SealedPartitionEventTrigger(ZooKeeperWatchTrigger, BaseEventTrigger):
    """Emit an event for each sealed epoch of ``partition``, in epoch order, from ``from_epoch`` on.

    Duplicates are refused in ZooKeeper itself: before emitting, the trigger creates the marker
    ``<pipeline>/asset-events/<scope>/<epoch>-<generation>-<partition>``; a second triggerer running
    the same trigger (HA triggerers, a restart) finds the marker and stays silent for that seal.

    :param pipeline: pipeline name.
    :param partition: the partition to watch.
    :param scope: the deduplication scope (one per Airflow deployment).
    :param from_epoch: the first epoch to report.
    """

    repeat = True

    def __init__(
        self,
        *,
        pipeline: str,
        partition: str,
        scope: str = "default",
        from_epoch: int = 1,
        zookeeper_conn_id: str = "zookeeper_default",
        root: str = DEFAULT_ROOT,
    ) -> None:
        super().__init__()
        self.pipeline = validate_name("pipeline", pipeline)
        self.partition = validate_name("partition", partition)
        self.scope = validate_name("owner", scope)
        self.from_epoch = validate_epoch(from_epoch)
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.paths = PipelinePaths(pipeline, root)
        self._next = self.from_epoch

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_epochs.triggers.assets.SealedPartitionEventTrigger",
            {"pipeline": self.pipeline, "partition": self.partition, "scope": self.scope,
             "from_epoch": self.from_epoch, "zookeeper_conn_id": self.zookeeper_conn_id, "root": self.root},
        )

    def check(self, client: KazooClient, wake: Wake) -> dict[str, Any] | None:
        markers = f"{self.paths.base}/asset-events/{self.scope}"
        while True:
            seals = read_seals(client, self.paths, self._next, [self.partition], wake)
            if seals is None:
                return None
            seal = seals[self.partition]
            epoch = self._next
            self._next += 1
            client.ensure_path(markers)
            try:
                client.create(f"{markers}/{epoch:010d}-{seal['generation']}-{self.partition}", b"")
            except NodeExistsError:
                continue  # another trigger instance emitted this seal already
            return {"pipeline": self.pipeline, "partition": self.partition, "epoch": epoch,
                    "partition_key": str(epoch), "attempt": seal["attempt"], "zxid": seal["zxid"]}
