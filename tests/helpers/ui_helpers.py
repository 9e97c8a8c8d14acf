"""The pipeline state the Epochs page tests look at, written through the coordination API, and what
the ledger itself says the grid must show (computed from ``EpochLedger`` reads, not from the UI code)."""

from __future__ import annotations

from kazoo.client import KazooClient

from airflow_epochs.coordination import (
    EpochLedger,
    PipelineConfig,
    StragglerPolicy,
)

PROBE = "uiprobe"
PROBE_CONFIG = PipelineConfig({"left": ("a", "b"), "right": ("c",)}, barriers={"ingested": ("a", "c")})


def build_probe(client: KazooClient, pipeline: str = PROBE) -> EpochLedger:
    """Epochs 1..3 sealed, 4 reopened after a rollback and its attempt aborted with one vote cast,
    5 rolled back; barrier ``ingested`` of epoch 4 declared with only ``a`` arrived; ``deploy-a`` leads."""
    ledger = EpochLedger(client, pipeline, owner="deploy-a")
    ledger.create_pipeline(PROBE_CONFIG)
    EpochLedger(client, pipeline, owner="deploy-a").lease().acquire()
    for epoch in range(1, 6):
        attempt = ledger.open_epoch(epoch)
        for partition, producer in (("left", "a"), ("left", "b"), ("right", "c")):
            ledger.vote(attempt, partition, producer,
                        {"outputs": {"data": {"rows": 100 * epoch, "bytes": 4096, "files": 1,
                                              "path": f"/lake/{epoch}"}}, "seconds": 1.5},
                        snapshot=f"/lake/totals/{epoch}" if producer == "c" else None,
                        upstream={"raw": epoch} if producer == "c" else None)
    ledger.rollback(3, reason="bad weather data")
    attempt = ledger.open_epoch(4)
    ledger.vote(attempt, "left", "a", {"rows": 7})
    barrier = EpochLedger(client, pipeline).barrier(4, "ingested")
    barrier.declare(StragglerPolicy.fail(3600))
    barrier.arrive("a")
    ledger.abort_attempt(attempt, reason="driver lost")
    return ledger


def resume_probe(client: KazooClient, pipeline: str = PROBE) -> None:
    """A standby takes epoch 4 over: seals ``right`` and casts one of the two votes ``left`` needs."""
    standby = EpochLedger(client, pipeline, owner="deploy-b")
    attempt = standby.open_epoch(4)
    standby.vote(attempt, "right", "c", {"rows": 9})
    standby.vote(attempt, "left", "b", {"rows": 8})


def expected_grid(ledger: EpochLedger, epochs: range) -> dict[int, dict[str, str]]:
    """epoch -> partition -> what the grid cell must say, from the ledger's own reads."""
    grid: dict[int, dict[str, str]] = {}
    for epoch in epochs:
        info = ledger.epoch_info(epoch)
        assert info is not None
        config = ledger.config_for(epoch).config
        cells = {}
        for partition in info.partitions:
            producers = config.partitions[partition]
            if info.state == "rolled_back":
                cells[partition] = "rolled back"
            elif ledger.seal(epoch, partition) is not None:
                cells[partition] = "sealed"
            else:
                votes = sum(1 for p in producers if (v := ledger.vote_of(epoch, partition, p)) is not None
                            and v.attempt == info.attempt)
                if info.attempt_state == "aborted":
                    cells[partition] = f"{votes} of {len(producers)}" if votes else "aborted"
                else:
                    cells[partition] = f"{votes} of {len(producers)}" if votes else "open"
        grid[epoch] = cells
    return grid
