"""The staging area of declared producers' votes (``<pipeline>/declared``): where a key's staged votes
live, reading them, and pruning the epochs the ledger no longer keeps (see
:mod:`~airflow_epochs.coordination.declared.votes` for staging and casting them).

The ``declared`` folder itself is never listed (its children grow with the epochs staged): its data is
a pruning cursor (:class:`StagedPruned`), and the epochs after it are probed by number.
"""

from __future__ import annotations

from airflow_epochs.coordination.base.call import Call
from airflow_epochs.coordination.base.paths import PipelinePaths, epoch_key
from airflow_epochs.coordination.base.steps import SetData
from airflow_epochs.coordination.declared.records import StagedKey, StagedPruned, StagedVote
from airflow_epochs.coordination.ledger import EpochLedger
from airflow_epochs.coordination.protocol.retention import delete_tree

# Staged epochs probed (one stat each) per round trip when pruning: the ``declared`` folder is never
# listed, since its children grow with the epochs staged.
PRUNE_PROBE = 500


def staged_epoch_path(paths: PipelinePaths, epoch: int) -> str:
    """``<pipeline>/declared/<epoch>``: the key staged for the epoch (data) and its staged votes."""
    return f"{paths.base}/declared/{epoch_key(epoch)}"


def decode_staged_key(raw: bytes | None) -> str | None:
    """The partition key in a staged epoch node's data."""
    return StagedKey.from_bytes(raw, path="staged epoch").partition_key if raw else None


def staged_votes(ledger: EpochLedger, epoch: int) -> list[tuple[str, str, StagedVote]]:
    """``(partition, producer, staged record)`` of every vote staged for ``epoch``.

    Both listings are bounded by the configuration in force at the epoch: only its partitions and
    their producers can be staged (:func:`~.declared_votes.stage_vote` checks), and it is at most 48 KB as JSON.
    """
    epoch_path = staged_epoch_path(ledger.paths, epoch)

    def body(call: Call) -> list[tuple[str, str, StagedVote]]:
        partitions = sorted(call.children(epoch_path) or [])
        listings = [call.children(f"{epoch_path}/{partition}") for partition in partitions]
        pairs = [(partition, producer) for partition, producers in zip(partitions, listings, strict=True)
                 for producer in sorted(producers or [])]
        paths = [f"{epoch_path}/{partition}/{producer}" for partition, producer in pairs]
        return [(partition, producer, StagedVote.from_bytes(raw.data, path=path))
                for (partition, producer), path, raw in zip(pairs, paths, call.get_many(paths), strict=True)
                if raw is not None]

    return list(ledger.ctx.call(body, what=f"read the staged votes of epoch {epoch}"))


def staged_key(ledger: EpochLedger, epoch: int) -> str | None:
    """The partition key staged for ``epoch``, or None."""
    path = staged_epoch_path(ledger.paths, epoch)

    def body(call: Call) -> str | None:
        raw = call.get(path)
        return None if raw is None else decode_staged_key(raw.data)

    return ledger.ctx.call(body, what=f"read the key staged for epoch {epoch}")


def prune_staged(ledger: EpochLedger, *, max_epochs: int = 2) -> list[int]:
    """Delete the staged votes of at most ``max_epochs`` epochs more than the configuration's
    ``retain_epochs`` behind the frontier (the ledger keeps those epochs' own votes no longer either).

    The ``declared`` folder is never listed: its data is a cursor (every staged epoch through it is
    pruned), and the epochs after it are probed, :data:`PRUNE_PROBE` stats per round trip.
    """
    frontier = ledger.frontier()
    if frontier < 1:
        return []
    retain = ledger.config_for(frontier).config.retain_epochs
    if retain is None:
        return []
    root = staged_epoch_path(ledger.paths, 1).rsplit("/", 1)[0]
    below = frontier - retain  # staged epochs before this one are pruned

    def body(call: Call) -> list[int]:
        raw = call.get(root)
        if raw is None:
            return []
        cursor = StagedPruned.from_bytes(raw.data, path=root)
        through = cursor.through if cursor is not None else ledger.ctx.record(call).first_epoch - 1
        last = min(below - 1, through + PRUNE_PROBE)
        candidates = list(range(through + 1, last + 1))
        stats = call.exists_many([staged_epoch_path(ledger.paths, e) for e in candidates])
        pruned: list[int] = []
        for epoch, stat in zip(candidates, stats, strict=True):
            if stat is not None:
                if len(pruned) == max_epochs:
                    last = epoch - 1
                    break
                delete_tree(call, staged_epoch_path(ledger.paths, epoch))
                pruned.append(epoch)
        if last > through:  # a lost race to another pruner only means it moved the cursor first
            call.try_commit([SetData(root, StagedPruned(last).to_bytes(), int(raw.stat.version))])
        return pruned

    return list(ledger.ctx.call(body, what=f"prune the staged votes of {ledger.pipeline!r}"))
