"""``airflow-epochs reseal`` and ``airflow-epochs corrections``: correct a sealed partition of a past
epoch as a new version, and follow the correction it starts (see ``EpochLedger.reseal``)."""

from __future__ import annotations

import argparse

from airflow_epochs.cli.pipelines import pipeline_ledger


def cmd_reseal(args: argparse.Namespace) -> int:
    from airflow_epochs.coordination import validate_epoch, validate_name
    from airflow_epochs.coordination.base.session import validate_request_id
    from airflow_epochs.coordination.recipes.corrections.reseal import check_reason

    # Bad input is refused before anything connects.
    validate_epoch(args.epoch)
    validate_name("partition", args.partition)
    check_reason(args.reason)
    if args.request_id is not None:
        validate_request_id(args.request_id)
    with pipeline_ledger(args) as ledger:
        asked = ledger.corrections.reseal(args.epoch, args.partition, reason=args.reason, request_id=args.request_id)
    print(f"pipeline {args.pipeline!r}: {asked.partition!r} at epoch {asked.epoch} is re-sealed as version "
          f"{asked.version} ({asked.state}; correction {asked.correction}, request {asked.request}); its producers "
          f"re-produce it and vote under version {asked.version}, then every seal that read it is re-produced")
    return 0


def cmd_corrections(args: argparse.Namespace) -> int:
    with pipeline_ledger(args) as ledger:
        if args.resume:
            ledger.corrections.resume()
        found = ledger.corrections.list()
        waiting = {item.correction: item for item in ledger.corrections.pending()}
    if not found:
        print(f"pipeline {args.pipeline!r}: no corrections")
    for node in found:
        epoch, partition, version = node.origin
        now = waiting.get(node.id)
        line = f"{node.id}: {partition} at epoch {epoch} as version {version}, {node.state}, {len(node.plan)} stale " \
               f"seal(s) re-produced"
        if now is not None:
            line += f"; waiting for {now.partition} at epoch {now.epoch} version {now.version}"
        print(line)
    return 0
