"""The ZooKeeper layout of one pipeline, in one place.

::

    <root>/<pipeline>                       pipeline record (first epoch, newest opened epoch)
        config/v-<seq>                      config versions, each naming its first epoch
        leader/                             leadership lease (kazoo NonBlockingLease)
        epochs/<epoch:010d>                 epoch record: state, current attempt, config version
            attempts/<token:010d>           one per try; the token fences zombies
            gen-<n>/                        one opening; a rollback starts the next generation
                progress                    which partitions are sealed (the epoch's tally)
                partitions/<name>           vote tally of the partition (serialises its voters)
                    votes/<producer>        one vote with its manifest
                    seal                    the immutable seal
        frontier                            highest epoch with it and all earlier ones sealed
        history/h-<seq>                     every state change, in commit order
        consumers/<id>                      acknowledged epoch of each consumer (backpressure)
        locks/<resource>                    kazoo Lock / ReadLock / WriteLock
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_epochs.coordination.names import validate_epoch, validate_name

DEFAULT_ROOT = "/airflow-epochs"


def epoch_key(epoch: int) -> str:
    """Znode name of an epoch: zero-padded so that lexical order is numeric order."""
    return f"{epoch:010d}"


@dataclass(frozen=True)
class PipelinePaths:
    """Paths of one pipeline's subtree; every name is validated on construction."""

    pipeline: str
    root: str = DEFAULT_ROOT

    def __post_init__(self) -> None:
        validate_name("pipeline", self.pipeline)
        if not self.root.startswith("/") or self.root.endswith("/") or "//" in self.root:
            raise ValueError(f"root must be an absolute znode path without a trailing '/': {self.root!r}")

    @property
    def base(self) -> str:
        return f"{self.root}/{self.pipeline}"

    @property
    def config_dir(self) -> str:
        return f"{self.base}/config"

    @property
    def leader(self) -> str:
        return f"{self.base}/leader"

    @property
    def epochs(self) -> str:
        return f"{self.base}/epochs"

    @property
    def frontier(self) -> str:
        return f"{self.base}/frontier"

    @property
    def history(self) -> str:
        return f"{self.base}/history"

    @property
    def consumers(self) -> str:
        return f"{self.base}/consumers"

    @property
    def locks(self) -> str:
        return f"{self.base}/locks"

    def epoch(self, epoch: int) -> str:
        return f"{self.epochs}/{epoch_key(validate_epoch(epoch))}"

    def attempts(self, epoch: int) -> str:
        return f"{self.epoch(epoch)}/attempts"

    def attempt(self, epoch: int, token: int) -> str:
        return f"{self.attempts(epoch)}/{token:010d}"

    def generation(self, epoch: int, generation: int) -> str:
        """Votes and seals of one opening of an epoch; a rollback starts a new generation and
        leaves the old one in place as the record of what was rolled back."""
        return f"{self.epoch(epoch)}/gen-{generation}"

    def progress(self, epoch: int, generation: int) -> str:
        return f"{self.generation(epoch, generation)}/progress"

    def partitions(self, epoch: int, generation: int) -> str:
        return f"{self.generation(epoch, generation)}/partitions"

    def partition(self, epoch: int, generation: int, partition: str) -> str:
        return f"{self.partitions(epoch, generation)}/{validate_name('partition', partition)}"

    def votes(self, epoch: int, generation: int, partition: str) -> str:
        return f"{self.partition(epoch, generation, partition)}/votes"

    def vote(self, epoch: int, generation: int, partition: str, producer: str) -> str:
        return f"{self.votes(epoch, generation, partition)}/{validate_name('producer', producer)}"

    def seal(self, epoch: int, generation: int, partition: str) -> str:
        return f"{self.partition(epoch, generation, partition)}/seal"

    def lock(self, resource: str) -> str:
        return f"{self.locks}/{validate_name('resource', resource)}"
