"""The pipeline commands (``history``, ``compact``, ``retire-scope``, ``status``, ``timeline``, ``acl``):
each connects like the ZooKeeperHook, from an Airflow connection (``--conn-id``) or from ``--hosts``
plus ``--digest-user`` (password in ``$AIRFLOW_EPOCHS_ZK_PASSWORD``, never on the command line) and the
TLS options; without either, to the deployment :mod:`airflow_epochs.cli.deployment` finds (the embedded
server of ``$AIRFLOW_EPOCHS_HOME``, else the Airflow connection ``zookeeper_default``)."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from airflow_epochs.cli.state import CliError, state_dir
from airflow_epochs.connection.embedded import with_embedded_credentials

PASSWORD_ENV = "AIRFLOW_EPOCHS_ZK_PASSWORD"  # noqa: S105 - the variable's name, not a password
MAX_TIMELINE_EPOCHS = 10_000


@contextlib.contextmanager
def zookeeper_settings(args: argparse.Namespace) -> Iterator[tuple[Any, str]]:
    """The connection settings of a pipeline command, built exactly as the ZooKeeperHook builds them:
    from the Airflow connection ``--conn-id``, or from ``--hosts``, ``--digest-user`` with
    ``$AIRFLOW_EPOCHS_ZK_PASSWORD`` and the TLS options; given neither, from the deployment
    :func:`~airflow_epochs.cli.deployment.found_settings` finds (the embedded server of
    ``$AIRFLOW_EPOCHS_HOME``, else the Airflow connection ``zookeeper_default``). A stopped embedded
    server it finds serves while the block runs. Yields the settings and where they came from, in words
    (for a refusal's message)."""
    from airflow_epochs.cli.deployment import found_settings
    from airflow_epochs.connection.zookeeper import InvalidConnection, ZooKeeperSettings

    direct = [flag for flag, value in (("--hosts", args.hosts), ("--digest-user", args.digest_user),
                                       ("--tls", args.tls), ("--ca", args.ca)) if value]
    if args.conn_id:
        if direct:
            raise CliError(f"--conn-id cannot be combined with {', '.join(direct)}: the connection says it all")
        from airflow_epochs.hooks.connections import connection_outside_task
        from airflow_epochs.hooks.zookeeper import settings_of

        conn = connection_outside_task(args.conn_id)  # the metadata database too, not only AIRFLOW_CONN_*
        try:
            settings = settings_of(conn)
        except InvalidConnection as exc:
            raise CliError(f"connection {args.conn_id!r}: {exc}") from None
        yield settings, f"connection {args.conn_id!r}"
        return
    if not direct:
        with found_settings(args.state_dir, connection_timeout=args.connect_timeout) as found:
            yield found
        return
    if not args.hosts:
        raise CliError(f"{', '.join(direct)} given without --hosts")
    hosts = args.hosts
    password = os.environ.get(PASSWORD_ENV) or None
    if args.digest_user and not password:
        raise CliError(f"--digest-user {args.digest_user!r} needs its password in ${PASSWORD_ENV} "
                       "(never on the command line, where other users can read it)")
    extra: dict[str, Any] = {"connection_timeout": args.connect_timeout}
    if args.tls or args.ca or args.certfile or args.keyfile:
        extra.update(use_tls=True, ca=args.ca, certfile=args.certfile, keyfile=args.keyfile,
                     check_hostname=not args.no_check_hostname)
    for option in ("ca", "certfile", "keyfile"):
        value = getattr(args, option)
        if value and not os.path.isfile(value):
            raise CliError(f"--{option} {value!r} is not a readable file")
    try:
        settings = ZooKeeperSettings.from_fields(host=hosts, login=args.digest_user, password=password if
                                                 args.digest_user else None, extra=extra)
    except InvalidConnection as exc:
        raise CliError(str(exc)) from None
    yield with_embedded_credentials(settings, state_dir(args.state_dir)), f"--hosts {hosts}"


@contextlib.contextmanager
def refusals_named(args: argparse.Namespace, settings: Any, source: str) -> Iterator[None]:
    """A NoAuth refusal inside the block, as one line naming what was refused and who asked: the
    identity the settings carry (or that they carry none) and where it came from."""
    from kazoo.exceptions import NoAuthError

    from airflow_epochs.coordination import AccessDenied

    try:
        yield
    except (NoAuthError, AccessDenied):
        target = f"pipeline {args.pipeline!r}" if getattr(args, "pipeline", None) else "the pipelines' root"
        if settings.login:
            raise CliError(f"ZooKeeper refused digest user {settings.login!r} (NoAuth) on {target}, connecting "
                           f"with {source}: the ACL there does not grant that identity this right; check the "
                           f"pipeline's ACL with its owner's credentials ('airflow-epochs acl check')") from None
        raise CliError(f"ZooKeeper refused access (NoAuth) on {target}: {source} carries no credentials and "
                       f"the pipeline is protected by an ACL; give them (--conn-id of a connection with a login "
                       f"and password, or --digest-user with ${PASSWORD_ENV})") from None


@contextlib.contextmanager
def pipeline_client(args: argparse.Namespace) -> Iterator[Any]:
    """A started kazoo client for a pipeline command, closed afterwards."""
    with zookeeper_settings(args) as (settings, source), refusals_named(args, settings, source):
        client = settings.start_client(timeout=min(args.connect_timeout, settings.connection_timeout))
        try:
            yield client
        finally:
            client.stop()
            client.close()


@contextlib.contextmanager
def pipeline_ledger(args: argparse.Namespace) -> Iterator[Any]:
    """A ledger of ``args.pipeline`` on the command's connection, closed afterwards."""
    from airflow_epochs.coordination import DEFAULT_ROOT
    from airflow_epochs.coordination.ledger import connected_ledger

    with zookeeper_settings(args) as (settings, source), refusals_named(args, settings, source):
        timeout = min(args.connect_timeout, settings.connection_timeout)
        with connected_ledger(lambda: settings.start_client(timeout=timeout), args.pipeline,
                              root=args.root or DEFAULT_ROOT) as ledger:
            yield ledger


def cmd_history(args: argparse.Namespace) -> int:
    with pipeline_ledger(args) as ledger:
        for event in ledger.history(since_seq=args.since, limit=args.limit):
            detail = " ".join(f"{k}={v}" for k, v in sorted(event.detail.items()) if k != "config")
            print(f"{event.seq:>8}  {event.zxid:>12x}  {event.event:<18} {detail}")
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    with pipeline_ledger(args) as ledger:
        report = ledger.compact(max_epochs=args.max_epochs)
    kept = f"; kept in full for their snapshots: {list(report.kept)}" if report.kept else ""
    print(f"compacted through epoch {report.through}: {len(report.compacted)} epoch(s) removed now, "
          f"{report.znodes_deleted} znodes and {report.events_pruned} history events deleted{kept}")
    return 0


def cmd_retire_scope(args: argparse.Namespace) -> int:
    from airflow_epochs.coordination import validate_name

    validate_name("owner", args.scope)  # a bad name is refused before anything connects
    with pipeline_ledger(args) as ledger:
        retired = ledger.retire_delivery_scope(args.scope)
    where = ", ".join(f"{partition} at epoch {epoch}" for partition, epoch in sorted(retired.cursors.items()))
    print(f"retired delivery scope {retired.scope!r} of pipeline {args.pipeline!r} (its cursors: {where or 'none'}); "
          "compaction is no longer held back by it")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from airflow_epochs.views.status import pipeline_status, render

    with pipeline_ledger(args) as ledger:
        print(render(pipeline_status(ledger, recent=args.recent)))
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    from airflow_epochs.views.timeline import draw

    epochs = epoch_range(args.epochs) if args.epochs else None
    for out in args.out:
        check_output(out)
    with pipeline_ledger(args) as ledger:
        try:
            found = draw(ledger, args.out, epochs=epochs)
        except ValueError as exc:
            raise CliError(str(exc)) from None
    lanes = sorted({s.lane for s in found})
    print(f"timeline of {len({s.epoch for s in found})} epochs, lanes {', '.join(lanes)}: {', '.join(args.out)}")
    return 0


def epoch_range(text: str) -> list[int]:
    from airflow_epochs.coordination import InvalidEpoch, validate_epoch

    first, _, last = text.partition("..")
    if not (first.isdigit() and (not last or last.isdigit())) or len(text) > 40:
        raise CliError(f"--epochs must look like 3..9 or 5, not {text!r}")
    try:
        low = validate_epoch(int(first), what="--epochs start")
        high = validate_epoch(int(last or first), what="--epochs end")
    except InvalidEpoch as exc:
        raise CliError(str(exc)) from None
    if high < low:
        raise CliError(f"--epochs {text!r} ends before it starts")
    if high - low + 1 > MAX_TIMELINE_EPOCHS:
        raise CliError(f"--epochs {text!r} spans {high - low + 1} epochs; a timeline draws at most "
                       f"{MAX_TIMELINE_EPOCHS}")
    return list(range(low, high + 1))


def check_output(path: str) -> None:
    """Refuse an output file that cannot be written, before anything is read or drawn."""
    target = Path(path)
    if target.suffix not in (".png", ".html"):
        raise CliError(f"--out {path!r} must end in .png or .html")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise CliError(f"--out {path!r}: folder {str(folder)!r} does not exist")
    if target.is_dir() or not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise CliError(f"--out {path!r} is not writable")


def cmd_acl(args: argparse.Namespace) -> int:
    from airflow_epochs.coordination import (
        DEFAULT_ROOT,
        PipelinePaths,
        repair_pipeline_acls,
        validate_name,
        validate_root,
        verify_pipeline_acls,
    )
    from airflow_epochs.coordination.base.acl import audit_pipeline_acls, protects_what_it_creates

    validate_name("pipeline", args.pipeline)
    paths = PipelinePaths(args.pipeline, validate_root(args.root or DEFAULT_ROOT))
    with pipeline_client(args) as client:
        if not protects_what_it_creates(client):
            raise CliError("ACLs can be checked and repaired only with credentials that protect what they "
                           f"create: --digest-user with ${PASSWORD_ENV}, or --conn-id of a connection with a "
                           "login, a password and use_acl")
        if args.action == "check":
            report_acls(args.pipeline, audit_pipeline_acls(client, paths))
            print(f"pipeline {args.pipeline!r}: only this connection's credentials can write anything under "
                  f"{paths.base}")
            return 0
        changed = repair_pipeline_acls(client, paths)  # names every node it may not change (InsecureAcl)
        verify_pipeline_acls(client, paths)
        report_acls(args.pipeline, audit_pipeline_acls(client, paths))
    print(f"pipeline {args.pipeline!r}: ACL set on {len(changed)} nodes; records written while it was open stay: "
          f"read 'airflow-epochs history {args.pipeline}'")
    return 0


def report_acls(pipeline: str, findings: Sequence[Any]) -> None:
    """Print every node others may write (one line each) and fail, or do nothing when there is none."""
    if not findings:
        return
    for finding in findings:
        print(f"insecure: {finding}")
    raise CliError(f"pipeline {pipeline!r}: {len(findings)} node(s) writable or administrable by others (listed "
                   f"above), first {findings[0]}; run 'airflow-epochs acl repair {pipeline}' with the owner's "
                   "credentials")
