"""PartitionsSealedTrigger: fires once every named partition of an epoch is sealed (alignment)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient

from airflow_epochs.coordination import DEFAULT_ROOT, PipelinePaths, validate_epoch, validate_name
from airflow_epochs.coordination.payloads import decode
from airflow_epochs.triggers.base import Wake, ZooKeeperWatchTrigger, watched_get


def read_seals(
    client: KazooClient, paths: PipelinePaths, epoch: int, partitions: Sequence[str], wake: Wake | None = None
) -> dict[str, dict[str, Any]] | None:
    """The seals of ``partitions`` at ``epoch`` (current generation) if all exist, else None.

    With ``wake``, one-shot watches are left on the epoch node and on each missing seal, so the
    caller hears of the next change (a seal, or a rollback that starts a new generation).
    """
    epoch_path = paths.epoch(epoch)
    node = watched_get(client, epoch_path, wake)
    if node is None:
        return None
    doc = decode("epoch", node[0], path=epoch_path)
    if doc["state"] == "rolled_back":
        return None
    seals: dict[str, dict[str, Any]] = {}
    for partition in partitions:
        path = paths.seal(epoch, doc["generation"], partition)
        found = watched_get(client, path, wake)
        if found is None:
            return None
        raw, stat = found
        seal = decode("seal", raw, path=path)
        seals[partition] = {"attempt": seal["attempt"], "generation": doc["generation"], "zxid": stat.czxid}
    return seals


class PartitionsSealedTrigger(ZooKeeperWatchTrigger):
    """Wait until every partition in ``partitions`` is sealed at ``epoch``.

    :param pipeline: pipeline name.
    :param epoch: the epoch.
    :param partitions: the partitions to align on.
    :param zookeeper_conn_id: ZooKeeper connection id.
    :param root: znode under which pipelines live.
    """

    def __init__(
        self,
        *,
        pipeline: str,
        epoch: int,
        partitions: Sequence[str],
        zookeeper_conn_id: str = "zookeeper_default",
        root: str = DEFAULT_ROOT,
    ) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.epoch = validate_epoch(epoch)
        self.partitions = [validate_name("partition", p) for p in partitions]
        self.zookeeper_conn_id = zookeeper_conn_id
        self.root = root
        self.paths = PipelinePaths(pipeline, root)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_epochs.triggers.seals.PartitionsSealedTrigger",
            {"pipeline": self.pipeline, "epoch": self.epoch, "partitions": list(self.partitions),
             "zookeeper_conn_id": self.zookeeper_conn_id, "root": self.root},
        )

    def check(self, client: KazooClient, wake: Wake) -> dict[str, Any] | None:
        seals = read_seals(client, self.paths, self.epoch, self.partitions, wake)
        if seals is None:
            return None
        return {"status": "success", "pipeline": self.pipeline, "epoch": self.epoch, "seals": seals}
