"""``airflow-epochs list``, ``abort`` and ``delete``: the pipelines under a root, a stray open attempt
aborted, a test pipeline deleted.

``delete`` removes a pipeline's whole ZooKeeper subtree, which nothing undoes: it asks for the pipeline's
name to be typed back, and refuses without a terminal unless ``--yes`` says so; it refuses while a leader
holds the pipeline's lease, and before anything connects when it cannot ask.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import sys
from collections.abc import Callable
from typing import Any

from airflow_epochs.cli.pipelines import pipeline_client, pipeline_ledger
from airflow_epochs.cli.state import CliError

__all__ = ["cmd_abort", "cmd_delete", "cmd_list"]

MAX_LISTED = 10_000  # pipelines one list prints (a root holds what one ensemble holds)


def _utc(seconds: float | None) -> str:
    if not seconds:
        return "-"
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def cmd_list(args: argparse.Namespace) -> int:
    """Every pipeline under the root: its frontier, the epoch in flight and the configuration in force."""
    from airflow_epochs.coordination import DEFAULT_ROOT, PipelineNotFound, validate_root
    from airflow_epochs.coordination.state.roots import pipeline_names
    from airflow_epochs.hooks.ledgers import ledger_on

    root = validate_root(args.root or DEFAULT_ROOT)
    with pipeline_client(args) as client:
        rows = []
        names = pipeline_names(client, root)
        for name in names[:MAX_LISTED]:
            try:
                ledger = ledger_on(client, name, root=root)
                frontier, newest = ledger.frontier(), ledger.newest_epoch()
            except PipelineNotFound:  # a node of the root that is no pipeline of ours
                continue
            open_epoch = ledger.epoch_info(newest) if newest > frontier else None
            in_flight = f"{open_epoch.epoch} {open_epoch.state} (attempt {open_epoch.attempt}, " \
                        f"{open_epoch.owner})" if open_epoch else "-"
            rows.append((name, str(frontier), in_flight))
    if not rows:
        print(f"no pipelines under {root}")
        return 0
    widths = [max(len(r[i]) for r in [("pipeline", "frontier", "in flight"), *rows]) for i in range(3)]
    for row in [("pipeline", "frontier", "in flight"), *rows]:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    if len(names) > MAX_LISTED:
        print(f"(the first {MAX_LISTED} of {len(names)} pipelines under {root})")
    return 0


def cmd_abort(args: argparse.Namespace) -> int:
    """Abort the running attempt of the pipeline's open epoch (``--epoch``, else the one in flight)."""
    from airflow_epochs.coordination import validate_epoch, validate_name
    from airflow_epochs.coordination.base.session import validate_request_id

    validate_name("pipeline", args.pipeline)  # bad input is refused before anything connects
    if args.epoch is not None:
        validate_epoch(args.epoch)
    if not args.reason.strip():
        raise CliError("--reason must say why (it is recorded in the pipeline's history)")
    if args.request_id is not None:
        validate_request_id(args.request_id)
    with pipeline_ledger(args) as ledger:
        epoch = args.epoch
        if epoch is None:
            frontier, newest = ledger.frontier(), ledger.newest_epoch()
            if newest <= frontier:
                raise CliError(f"pipeline {args.pipeline!r} has no epoch in flight (frontier {frontier}): nothing "
                               "to abort; nothing was written")
            epoch = newest
        attempt = ledger.current_attempt(epoch)  # EpochNotOpen / EpochAlreadySealed name the epoch
        info = ledger.epoch_info(epoch)
        if info is not None and info.attempt_state != "running":
            raise CliError(f"pipeline {args.pipeline!r}: attempt {attempt.token} of epoch {epoch} is "
                           f"{info.attempt_state}, not running: nothing to abort; nothing was written")
        done = ledger.abort_attempt(attempt, reason=args.reason, request_id=args.request_id)
    print(f"pipeline {args.pipeline!r}: aborted attempt {done.attempt} of epoch {done.epoch} (owner "
          f"{attempt.owner}, opened {_utc(attempt.opened_at)}; request {done.request}); its votes are refused "
          "from now on, and the epoch's next opening starts a new attempt")
    return 0


def cmd_delete(args: argparse.Namespace, *, ask: Callable[[str], str] = input) -> int:
    """Delete the pipeline's ZooKeeper subtree, after the pipeline's name is typed back (or ``--yes``)."""
    from airflow_epochs.coordination import DEFAULT_ROOT, PipelineNotFound, PipelinePaths, validate_name, validate_root

    validate_name("pipeline", args.pipeline)
    root = validate_root(args.root or DEFAULT_ROOT)
    if not args.yes and not sys.stdin.isatty():
        raise CliError(f"delete pipeline {args.pipeline!r}: no terminal to confirm on; pass --yes to delete without "
                       "asking (nothing was connected to or deleted)")
    base = PipelinePaths(args.pipeline, root).base
    with pipeline_ledger(args) as ledger:
        try:
            frontier, newest = ledger.frontier(), ledger.newest_epoch()
        except PipelineNotFound:
            raise CliError(f"no pipeline {args.pipeline!r} under {root}: nothing deleted") from None
        holder = ledger.lease().holder()
        if holder is not None and holder.remaining() > 0:
            raise CliError(f"pipeline {args.pipeline!r} is led by {holder.owner!r} until {holder.until:%H:%M:%S} UTC: "
                           "stop what drives it first (nothing was deleted)")
        what = f"pipeline {args.pipeline!r} ({base}: frontier {frontier}, newest epoch {newest})"
        if not args.yes:
            answer = ask(f"delete {what} and its whole history from ZooKeeper? Type the pipeline's name to "
                         "confirm: ")
            if answer.strip() != args.pipeline:
                raise CliError(f"not confirmed ({answer.strip()[:60]!r} is not {args.pipeline!r}): nothing deleted")
        with contextlib.suppress(PipelineNotFound):  # another delete got there first
            ledger.delete_pipeline(confirm=args.pipeline)
    print(f"deleted {what}; an archive in the pipeline's storage, if it has one, is not touched")
    return 0


def add_maintenance_commands(sub: Any, connection_args: Callable[[argparse.ArgumentParser], None],
                             positive: Callable[[str], int]) -> None:
    """The ``list``, ``abort`` and ``delete`` subcommands (their connection options as every pipeline
    command's)."""
    listing = sub.add_parser("list", help="the pipelines under the root: frontier and the epoch in flight")
    connection_args(listing)
    listing.set_defaults(func=cmd_list, pipeline=None)
    abort = sub.add_parser("abort", help="abort the running attempt of an open epoch (a stray attempt whose "
                           "process is gone): its votes are refused, and the next opening starts a new attempt")
    abort.add_argument("pipeline")
    connection_args(abort)
    abort.add_argument("--epoch", type=positive, help="the open epoch (default: the one in flight)")
    abort.add_argument("--reason", required=True, help="why (recorded in the pipeline's history)")
    abort.add_argument("--request-id", help="repeat the command with the same id to learn what it did")
    abort.set_defaults(func=cmd_abort)
    delete = sub.add_parser("delete", help="delete a pipeline's whole ZooKeeper subtree (a test pipeline): asks "
                            "for its name to be typed back")
    delete.add_argument("pipeline")
    connection_args(delete)
    delete.add_argument("--yes", action="store_true", help="delete without asking (required without a terminal)")
    delete.set_defaults(func=cmd_delete)
