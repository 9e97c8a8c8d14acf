"""Fleet capacity (part of group ``capacity``): what one pipeline keeps in ZooKeeper at rest and
mid-epoch when the past goes to the archive, and what two fleets would cost one ensemble.

For each measured shape (partitions x producers) a pipeline with the default ``retain_epochs`` and an
``archive`` in a temporary folder runs ``epochs`` epochs, compacting after each one as the coordinator
does. A sealed partition is one znode (its votes fold into its seal) and archived epochs leave
ZooKeeper whole (snapshot pointers' epochs included: their snapshots are read from the archive); with
the default window of an archived pipeline (``retain_epochs=0``) that is every sealed epoch, so
mid-epoch a pipeline holds its open epoch (one compact znode per vote cast) and what the promises need.
Measured: znodes and bytes of the pipeline's subtree at rest (everything sealed and compacted)
and mid-epoch (the next epoch open, every vote but the last of each partition cast: the most an epoch
holds before its seals), archive bytes per epoch, and requests and write transactions per epoch
(compaction and archiving included). Bytes are ZooKeeper's own measure (``zk_approximate_data_size``
counts each znode's path and data).

The fleets are extrapolated with the least-squares fit ``a + b*P + c*P*N`` of each measure, over the
shapes with more than one producer per partition (a sole producer's vote never has a znode):

- 10,000 pipelines x 100 partitions x 10 producers, daily epochs, every pipeline's epoch in the same
  hour (the busiest hour holds all 10,000 epochs);
- 1,000 pipelines x 10 partitions x 3 producers, hourly epochs;

against ZooKeeper's published limits: about 21,000 writes/s on 3 servers, state in memory (the
rows' ``fits`` say whether the data stays within 2 GB and the writes within 50 % of the limit).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

from common import client, count_znodes, figure, mntr
from kazoo.client import KazooClient
from state_growth import ZK_WRITES_PER_S, fit_shapes, seal_epoch

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.coordination.wire.config import DEFAULT_RETAIN_EPOCHS
from airflow_epochs.servers.embedded_zookeeper import ZooKeeperEnsemble

RETAIN = DEFAULT_RETAIN_EPOCHS
FLEETS = (
    ("10k_daily", 10_000, 100, 10, 24 * 3600.0),
    ("1k_hourly", 1_000, 10, 3, 3600.0),
)
GB_LIMIT = 2.0
WRITE_PCT_LIMIT = 50.0


def _requests(ledger: EpochLedger) -> tuple[int, int]:
    stats = ledger.session.stats
    return stats["reads"] + stats["transactions"] + stats["failed_transactions"], stats["transactions"]


def _measure(zk: KazooClient, name: str, partitions: int, producers: int, epochs: int,
             storage: Path) -> dict[str, float]:
    ledger = EpochLedger(zk, name, owner="bench")
    shape = {f"part{p}": tuple(f"prod{q}" for q in range(producers)) for p in range(partitions)}
    ledger.create_pipeline(PipelineConfig(shape, retain_epochs=RETAIN, archive=str(storage)))
    for epoch in range(1, RETAIN + 2):  # warm: the window fills and compaction starts
        seal_epoch(ledger, epoch, partitions, producers, snapshot="s3://state")
        ledger.compact()
    requests0, transactions0 = _requests(ledger)
    first = RETAIN + 2
    for epoch in range(first, first + epochs):
        seal_epoch(ledger, epoch, partitions, producers, snapshot="s3://state")
        ledger.compact()
    requests1, transactions1 = _requests(ledger)
    rest_nodes, rest_bytes = count_znodes(zk, ledger.paths.base, with_paths=True)
    attempt = ledger.open_epoch(first + epochs)
    for p in range(partitions):
        for q in range(producers - 1):
            ledger.vote(attempt, f"part{p}", f"prod{q}", {"rows": q})
    mid_nodes, mid_bytes = count_znodes(zk, ledger.paths.base, with_paths=True)
    files = list((storage / name / "_epochs").glob("epoch-*.jsonl"))
    archive_bytes = sum(f.stat().st_size for f in files) / max(1, len(files))
    return {"rest_znodes": rest_nodes, "rest_bytes": rest_bytes, "mid_znodes": mid_nodes, "mid_bytes": mid_bytes,
            "archive_bytes": archive_bytes, "requests": (requests1 - requests0) / epochs,
            "transactions": (transactions1 - transactions0) / epochs}


def run(hosts: str, shapes: tuple[tuple[int, int], ...], epochs: int,
        model_run: tuple[int, int, int, int] | None = None) -> None:
    """The per-shape rows and the fleets; with ``model_run`` (pipelines, partitions, producers, epochs)
    also the check of the model against a real run on a 3-node ensemble."""
    zk = client(hosts)
    storage = Path(tempfile.mkdtemp(prefix="epochs-archive-bench-"))
    measured: dict[tuple[int, int], dict[str, float]] = {}
    try:
        for p, n in shapes:
            m = measured[(p, n)] = _measure(zk, f"fleet-{p}x{n}", p, n, epochs, storage)
            figure(f"capacity_rest_kb_{p}x{n}", "capacity",
                   f"ZooKeeper data per pipeline at rest, {p} partitions x {n} producers, retain_epochs={RETAIN}",
                   m["rest_bytes"] / 1024, "KB", f"{m['rest_znodes']:.0f} znodes", **m)
            figure(f"capacity_mid_kb_{p}x{n}", "capacity", "same, mid-epoch (every vote but the last cast)",
                   m["mid_bytes"] / 1024, "KB", f"{m['mid_znodes']:.0f} znodes")
            figure(f"capacity_archive_kb_per_epoch_{p}x{n}", "capacity", f"archive bytes per epoch, {p}x{n}",
                   m["archive_bytes"] / 1024, "KB", "one JSON-lines file per epoch in the pipeline's storage")
            figure(f"capacity_requests_per_epoch_{p}x{n}", "capacity",
                   f"requests per epoch, {p}x{n}, compaction and archiving included", m["requests"], "requests",
                   f"{m['transactions']:.1f} write transactions")
    finally:
        zk.stop()
        zk.close()
        shutil.rmtree(storage, ignore_errors=True)
    # A sole producer's vote lives in its seal (no vote znode), so shapes with one producer per partition
    # are of another kind: the fleets (3 and 10 producers) are fitted on the shapes with several.
    several = {shape: m for shape, m in measured.items() if shape[1] > 1}
    basis = several if len(several) >= 3 else measured
    fit: dict[str, tuple[float, float, float]] = {
        key: fit_shapes({shape: m[key] for shape, m in basis.items()})
        for key in ("mid_bytes", "mid_znodes", "rest_bytes", "rest_znodes", "archive_bytes", "transactions")}

    def at(key: str, partitions: int, producers: int) -> float:
        a, b, c = fit[key]
        return a + b * partitions + c * partitions * producers

    for name, pipelines, partitions, producers, period in FLEETS:
        shape = f"{pipelines:,} pipelines x {partitions} partitions x {producers} producers"
        mid_gb = pipelines * at("mid_bytes", partitions, producers) / 1e9
        rest_gb = pipelines * at("rest_bytes", partitions, producers) / 1e9
        mid_znodes = pipelines * at("mid_znodes", partitions, producers)
        fits = mid_gb <= GB_LIMIT
        figure(f"capacity_fleet_{name}_gb", "capacity",
               f"ZooKeeper data, {shape}, every pipeline mid-epoch, retain_epochs={RETAIN} + archive",
               mid_gb, "GB", (f"fits (at most {GB_LIMIT:g} GB)" if fits else
                              f"DOES NOT FIT ({GB_LIMIT:g} GB at most): the open epoch's votes (one znode each "
                              f"until their seal) and the {RETAIN} kept epochs' folded seals")
               + f"; {mid_znodes:,.0f} znodes; at rest {rest_gb:.2f} GB; archive "
               f"{pipelines * at('archive_bytes', partitions, producers) / 1e9:.2f} GB per round of epochs",
               fits=fits, at_rest_gb=rest_gb, znodes=mid_znodes)
        # the busiest hour: a daily fleet's epochs all land in one hour; an hourly fleet's spread over it
        epochs_in_busiest_hour = pipelines * max(1.0, 3600.0 / period) if period <= 3600.0 else pipelines
        tx_per_s = epochs_in_busiest_hour * at("transactions", partitions, producers) / 3600.0
        pct = 100.0 * tx_per_s / ZK_WRITES_PER_S
        figure(f"capacity_fleet_{name}_write_pct", "capacity",
               f"share of {ZK_WRITES_PER_S:,} writes/s at the busiest hour, {shape}", pct, "%",
               f"{tx_per_s:,.0f} write transactions/s; "
               + ("fits" if pct <= WRITE_PCT_LIMIT else f"DOES NOT FIT ({WRITE_PCT_LIMIT:g} % at most)"),
               fits=pct <= WRITE_PCT_LIMIT, tx_per_s=tx_per_s)
    if model_run is not None:
        pipelines, partitions, producers, epochs_each = model_run
        check_model(pipelines, partitions, producers, epochs_each,
                    at("rest_znodes", partitions, producers), at("rest_bytes", partitions, producers))


def _ensemble_size(cluster: ZooKeeperEnsemble) -> tuple[int, int]:
    """(znodes, approximate data bytes) ZooKeeper reports, from the leader."""
    leader = cluster.leader()
    report = mntr(cluster.members[leader if leader is not None else 0].client_port)
    return int(report["zk_znode_count"]), int(report["zk_approximate_data_size"])


def check_model(pipelines: int, partitions: int, producers: int, epochs: int, znodes_each: float,
                bytes_each: float, workers: int = 8) -> None:
    """A real run on a 3-node loopback ensemble: ``pipelines`` pipelines of the shape, ``epochs`` epochs
    each, compacted as they go; what ZooKeeper then reports against the model's prediction."""
    cluster = ZooKeeperEnsemble(3, max_client_connections=0, heap_mb=512)
    cluster.start()
    storage = Path(tempfile.mkdtemp(prefix="epochs-archive-model-"))
    try:
        znodes0, bytes0 = _ensemble_size(cluster)
        shape = {f"part{p}": tuple(f"prod{q}" for q in range(producers)) for p in range(partitions)}
        # names as long as the measured pipelines' ("fleet-10x10"): the paths are part of the bytes
        names = [f"model-{i:05d}" for i in range(pipelines)]
        failures: list[BaseException] = []
        started = time.monotonic()

        def work(mine: list[str]) -> None:
            zk = client(cluster.hosts)
            try:
                ledgers = [EpochLedger(zk, name, owner="bench") for name in mine]
                for ledger in ledgers:
                    ledger.create_pipeline(PipelineConfig(shape, retain_epochs=RETAIN, archive=str(storage)))
                for epoch in range(1, epochs + 1):
                    for ledger in ledgers:
                        seal_epoch(ledger, epoch, partitions, producers, snapshot="s3://state")
                        ledger.compact()
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)
            finally:
                zk.stop()
                zk.close()

        threads = [threading.Thread(target=work, args=(names[i::workers],)) for i in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]
        took = time.monotonic() - started
        znodes1, bytes1 = _ensemble_size(cluster)
    finally:
        cluster.stop()
        shutil.rmtree(storage, ignore_errors=True)
    measured_znodes, measured_bytes = znodes1 - znodes0, bytes1 - bytes0
    predicted_znodes, predicted_bytes = pipelines * znodes_each, pipelines * bytes_each
    znode_error = 100.0 * abs(predicted_znodes - measured_znodes) / measured_znodes
    byte_error = 100.0 * abs(predicted_bytes - measured_bytes) / measured_bytes
    error = max(znode_error, byte_error)
    figure("capacity_model_error_pct", "capacity",
           f"model vs a real run: {pipelines} pipelines x {partitions} x {producers}, {epochs} epochs each, "
           "3-node ensemble, at rest", error, "%",
           f"ZooKeeper (mntr) {measured_znodes:,} znodes / {measured_bytes:,} bytes, model {predicted_znodes:,.0f} / "
           f"{predicted_bytes:,.0f} ({znode_error:.1f} % / {byte_error:.1f} %); "
           + ("within 10 %" if error <= 10.0 else "MORE THAN 10 % off") + f"; {took:.0f} s",
           measured_znodes=measured_znodes, measured_bytes=measured_bytes, predicted_znodes=predicted_znodes,
           predicted_bytes=predicted_bytes)
