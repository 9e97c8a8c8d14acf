"""The ``airflow-epochs`` argument parser: every usage error is one line, exit status 2."""

from __future__ import annotations

import argparse
import functools
from typing import Any

from airflow_epochs.cli.analyze import add_analyze_command
from airflow_epochs.cli.corrections import cmd_corrections, cmd_reseal
from airflow_epochs.cli.deployment import DEFAULT_CONN_ID
from airflow_epochs.cli.maintenance import add_maintenance_commands
from airflow_epochs.cli.pipelines import (
    PASSWORD_ENV,
    cmd_acl,
    cmd_compact,
    cmd_history,
    cmd_retire_scope,
    cmd_status,
    cmd_timeline,
)
from airflow_epochs.cli.servers import ACTIONS, run_server_command
from airflow_epochs.cli.spark_connect import SPARK_CONNECT
from airflow_epochs.cli.state import STATE_ENV, state_dir
from airflow_epochs.cli.zookeeper import ZOOKEEPER, print_values

DESCRIPTION = "airflow-epochs: manage the embedded ZooKeeper and look at pipelines."


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return int(text)


def _non_negative(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, not {text!r}")
    return int(text)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be between 0 and 3600 seconds, not {text!r}")
    return value


def _recent(text: str) -> int:
    if not text.isdigit() or int(text) > 1000:
        raise argparse.ArgumentTypeError(f"must be a number of epochs from 0 to 1000, not {text!r}")
    return int(text)


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"not a TCP port (1-65535): {text!r}")
    return int(text)


def _master(text: str) -> str:
    import re

    if not re.fullmatch(r"local(\[(\*|[1-9][0-9]{0,3})\])?|spark://[A-Za-z0-9.\-]+:[0-9]{1,5}", text):
        raise argparse.ArgumentTypeError(f"must be local, local[N], local[*] or spark://host:port, not {text!r}")
    return text


def _pipeline_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline")
    _connection_args(parser)


def _connection_args(parser: argparse.ArgumentParser) -> None:
    """How a command reaches ZooKeeper; given none, it finds the deployment (airflow_epochs.cli.deployment)."""
    parser.add_argument("--conn-id", help="an Airflow connection of type zookeeper (hosts, chroot, credentials, TLS); "
                        f"default: the embedded server of ${STATE_ENV} if there is one, else {DEFAULT_CONN_ID!r}")
    parser.add_argument("--hosts", help="ZooKeeper connect string, with an optional chroot")
    parser.add_argument("--digest-user", help=f"digest user; its password comes from ${PASSWORD_ENV}")
    parser.add_argument("--tls", action="store_true", help="connect with TLS")
    parser.add_argument("--ca", help="CA certificate file (PEM) for TLS")
    parser.add_argument("--certfile", help="client certificate (PEM) for TLS")
    parser.add_argument("--keyfile", help="client key (PEM) for TLS")
    parser.add_argument("--no-check-hostname", action="store_true", help="do not check the server's host name")
    parser.add_argument("--connect-timeout", type=_positive_seconds, default=15.0,
                        help="seconds to wait for ZooKeeper (default 15)")
    parser.add_argument("--root", help="znode under which pipelines live")


def _zookeeper_command(args: argparse.Namespace) -> int:
    if args.action == "values":
        return print_values(state_dir(args.state_dir))
    return run_server_command(ZOOKEEPER, args)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (exit status 2), like every other error of the CLI."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="airflow-epochs", description=DESCRIPTION)
    parser.add_argument("--state-dir", help=f"state folder (default ${STATE_ENV} or ~/.airflow-epochs)")
    sub = parser.add_subparsers(dest="command", required=True)
    zk = sub.add_parser("zookeeper", help="start, stop or check the embedded ZooKeeper server, or print what a "
                        "connection to it holds (values)")
    zk.add_argument("action", choices=(*ACTIONS, "values"))
    zk.add_argument("--port", type=_port, help="client port (default: the previous one, else a free one)")
    zk.add_argument("--plaintext", action="store_true", help="serve without TLS: clients then send the digest "
                    "password in clear (default: TLS with a CA generated into the state folder)")
    zk.add_argument("--unresponsive-after", type=_positive_seconds, default=30.0,
                    help="start: seconds without an answer after which the watchdog restarts the server "
                    "(default 30; one that exited is restarted at once)")
    zk.set_defaults(func=_zookeeper_command)
    connect = sub.add_parser("spark-connect", help="start, stop or check a warm Spark Connect server")
    connect.add_argument("action", choices=ACTIONS)
    connect.add_argument("--port", type=_port, help="gRPC port (default: a free one)")
    connect.add_argument("--master", type=_master, default="local[2]",
                         help="Spark master of the server (default local[2])")
    connect.add_argument("--conn-id", help="take the token clients must send from this Airflow spark_connect "
                         "connection's password (default: the previous token, else a new one)")
    connect.add_argument("--probe-timeout", type=_positive_seconds, default=60.0,
                         help="status: seconds the test query may take before the server counts as unhealthy")
    connect.set_defaults(func=functools.partial(run_server_command, SPARK_CONNECT))
    history = sub.add_parser("history", help="print a pipeline's recorded state changes (seq, zxid, event)")
    _pipeline_args(history)
    history.add_argument("--since", type=_non_negative, default=-1, metavar="SEQ",
                         help="only the events after this sequence number (a cursor from an earlier call)")
    history.add_argument("--limit", type=_positive, help="at most this many events")
    history.set_defaults(func=cmd_history)
    compact = sub.add_parser("compact", help="apply the pipeline's retain_epochs now (the coordinator also does "
                             "this as it opens epochs)")
    _pipeline_args(compact)
    compact.add_argument("--max-epochs", type=_positive, help="compact at most this many epochs")
    compact.set_defaults(func=cmd_compact)
    retire = sub.add_parser("retire-scope", help="remove an asset-delivery scope nobody delivers any more, so that "
                            "compaction proceeds past its cursor (refused while a deliverer holds it)")
    _pipeline_args(retire)
    retire.add_argument("scope", help="the delivery scope (a deployment's scope, as its watchers were given it)")
    retire.set_defaults(func=cmd_retire_scope)
    status = sub.add_parser("status", help="frontier, leader, open epochs, votes, seals and barriers as a table")
    _pipeline_args(status)
    status.add_argument("--recent", type=_recent, metavar="N", default=1,
                        help="also show the last N sealed epochs (default 1, at most 1000)")
    status.set_defaults(func=cmd_status)
    timeline = sub.add_parser("timeline", help="draw each epoch's stages on a time axis (PNG and/or HTML)")
    _pipeline_args(timeline)
    timeline.add_argument("--out", action="append", required=True, help="output file, .png or .html (repeatable)")
    timeline.add_argument("--epochs", help="only these epochs, e.g. 3..9")
    timeline.set_defaults(func=cmd_timeline)
    add_maintenance_commands(sub, _connection_args, _positive)
    add_analyze_command(sub)
    acl = sub.add_parser("acl", help="check, or repair, that only this connection's credentials can write a "
                         "pipeline's subtree")
    acl.add_argument("action", choices=["check", "repair"])
    _pipeline_args(acl)
    acl.set_defaults(func=cmd_acl)
    reseal = sub.add_parser("reseal", help="re-seal a partition of a sealed past epoch as a new version (a late or "
                            "corrected input); every seal that read it is then re-produced, nothing else")
    _pipeline_args(reseal)
    reseal.add_argument("epoch", type=_positive)
    reseal.add_argument("partition")
    reseal.add_argument("--reason", required=True, help="why (recorded in the pipeline's history)")
    reseal.add_argument("--request-id", help="repeat the command with the same id to learn what it did")
    reseal.set_defaults(func=cmd_reseal)
    corrections = sub.add_parser("corrections", help="list a pipeline's corrections and what each waits for")
    _pipeline_args(corrections)
    corrections.add_argument("--resume", action="store_true", help="first advance every unfinished correction "
                             "(after a process driving one was killed)")
    corrections.set_defaults(func=cmd_corrections)
    from airflow_epochs.tables.cli_command import add_table_command

    add_table_command(sub)
    return parser
