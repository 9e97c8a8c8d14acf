"""``airflow-epochs``: manage the embedded ZooKeeper and look at pipelines.

::

    airflow-epochs zookeeper start [--port N]   # detached server, data kept in the state dir
    airflow-epochs zookeeper status
    airflow-epochs zookeeper stop
    airflow-epochs spark-connect start [--port N] [--master local[2]]   # warm Spark Connect server
    airflow-epochs spark-connect status
    airflow-epochs spark-connect stop
    airflow-epochs history PIPELINE --hosts 127.0.0.1:2181 [--since SEQ] [--limit N]
    airflow-epochs compact PIPELINE [--max-epochs N]            # apply retain_epochs now
    airflow-epochs status PIPELINE [--hosts H]                  # tables: frontier, leader, votes, barriers
    airflow-epochs timeline PIPELINE --out t.png --out t.html   # each epoch's stages on a time axis
    airflow-epochs analyze DAG_FILE_OR_ID [--format table|json|dot|png] [--out FILE]   # Blazes analysis
    airflow-epochs acl check|repair PIPELINE --conn-id zookeeper_default   # verify / repair the subtree's ACLs
    airflow-epochs table read NS.TABLE --as-of-epoch N --conn-id iceberg_default   # a published table at epoch N

Pipeline commands connect like the ZooKeeperHook, from an Airflow connection (``--conn-id``) or from
``--hosts`` plus ``--digest-user`` (password in ``$AIRFLOW_EPOCHS_ZK_PASSWORD``, never on the command
line) and ``--tls``/``--ca``/``--certfile``/``--keyfile``. Every error is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from airflow_epochs.embedded_zookeeper import (
    EmbeddedZooKeeper,
    ZooKeeperError,
    four_letter_word,
)
from airflow_epochs.private_files import check_private_dir, private_dir, read_private, write_private
from airflow_epochs.process_identity import NotOurProcess, ProcessIdentity, stop_verified

STATE_ENV = "AIRFLOW_EPOCHS_HOME"
PASSWORD_ENV = "AIRFLOW_EPOCHS_ZK_PASSWORD"  # noqa: S105 - the variable's name, not a password
MAX_TIMELINE_EPOCHS = 10_000


def state_dir(explicit: str | None) -> Path:
    """Where the CLI keeps the embedded server's data and pid: ``--state-dir``, ``$AIRFLOW_EPOCHS_HOME``
    or ``~/.airflow-epochs``. Not resolved: a link in its place is refused, never followed."""
    return Path(explicit or os.environ.get(STATE_ENV) or Path.home() / ".airflow-epochs").expanduser().absolute()


def _state_file(base: Path, server: str = "zookeeper") -> Path:
    return base / f"{server}.json"


def _read_state(base: Path, server: str = "zookeeper") -> dict[str, Any] | None:
    """What the CLI recorded when it started ``server`` (``zookeeper`` or ``spark-connect``); None if
    nothing is. A folder or file another user owns or may write is refused, and so is a file that is
    not a state (one line each, naming the file)."""
    path = _state_file(base, server)
    if not os.path.lexists(base):
        return None
    check_private_dir(base)
    try:
        text = read_private(path)
    except FileNotFoundError:
        return None
    try:
        data = decode_state(text)
    except ValueError as exc:
        raise CliError(f"{path} is corrupt ({exc}): remove it (and stop the server yourself if one runs)") from None
    return data


def decode_state(text: str) -> dict[str, Any]:
    """A state file's object, its port (if any) checked to be a TCP port; :class:`ValueError` otherwise."""
    from airflow_epochs.coordination.payloads import loads_bounded

    data = loads_bounded(text)
    if not isinstance(data, dict):
        raise ValueError(f"not an object but {type(data).__name__}")
    if "port" in data:
        data["port"] = _state_port(data["port"])
    return data


def _state_port(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise ValueError(f"port {str(value)[:40]!r} is not a TCP port")
    return value


# -- process identity: a pid is signalled only while it is still the server we started -----------

def _recorded_identity(state: dict[str, Any]) -> ProcessIdentity | None:
    try:
        return ProcessIdentity.from_json(state["identity"]) if state.get("identity") else None
    except ValueError:
        return None


def _alive(state: dict[str, Any]) -> bool:
    """Whether the recorded server still runs: the same process (pid, start time, command line)."""
    identity = _recorded_identity(state)
    return identity is not None and identity.alive()


def _stop_recorded(base: Path, server: str, *, group: bool) -> bool:
    """Stop the server recorded in ``base`` after checking it is the one we started; the state file
    goes once the server is gone. A pid that runs something else is never signalled (a CliError)."""
    state = _read_state(base, server)
    if not state or ("pid" not in state and "identity" not in state):  # nothing recorded as running
        return False
    identity = _recorded_identity(state)
    if identity is None:
        raise CliError(f"{_state_file(base, server)} records pid {state.get('pid')!r} but no process identity "
                       "(start time and command line) to check it against: not signalling it. Stop the server "
                       "yourself if it is still running, then remove that file")
    try:
        stopped = stop_verified(identity, group=group)
    except NotOurProcess as exc:
        raise CliError(f"{exc}. The state file {_state_file(base, server)} is stale: remove it") from None
    if "port" in state:  # the port stays: the next start takes it again (connections keep working)
        write_private(_state_file(base, server), json.dumps({"port": state["port"]}))
    else:
        _state_file(base, server).unlink(missing_ok=True)
    return stopped


def running_server(base: Path) -> dict[str, Any] | None:
    """The state of the CLI-managed server if it is running and serving, else None."""
    state = _read_state(base)
    if not state or not _alive(state):
        return None
    answer = four_letter_word(int(state["port"]))
    if "Mode:" not in answer:
        return None
    state["mode"] = next(line.split(":", 1)[1].strip() for line in answer.splitlines() if line.startswith("Mode:"))
    return state


def start_server(base: Path, port: int | None = None) -> dict[str, Any]:
    """Start (or find) the detached embedded server; returns its state."""
    current = running_server(base)
    if current:
        return {**current, "already_running": True}
    server = EmbeddedZooKeeper(directory=private_dir(base) / "zookeeper", port=port or _previous_port(base))
    server.start()
    identity = server.identity(0)
    state = {"pid": server.pid, "port": server.port, "hosts": server.hosts, "directory": str(server.directory),
             "identity": identity.to_json() if identity else None}
    write_private(_state_file(private_dir(base)), json.dumps(state))
    return {**state, "mode": "standalone", "already_running": False}


def _previous_port(base: Path, server: str = "zookeeper") -> int | None:
    # Reuse the last port so connections configured against it keep working across restarts.
    state = _read_state(base, server)
    return int(state["port"]) if state and "port" in state else None


def stop_server(base: Path) -> bool:
    return _stop_recorded(base, "zookeeper", group=False)


def _cmd_zookeeper(args: argparse.Namespace) -> int:
    base = state_dir(args.state_dir)
    if args.action == "start":
        try:
            state = start_server(base, args.port)
        except ZooKeeperError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        verb = "already running" if state["already_running"] else "started"
        print(f"ZooKeeper {verb} at {state['hosts']} (pid {state['pid']}, data in {state['directory']})")
        return 0
    if args.action == "status":
        running = running_server(base)
        if running is None:
            print("ZooKeeper is not running")
            return 1
        print(f"ZooKeeper running at {running['hosts']} (pid {running['pid']}, mode {running['mode']})")
        return 0
    if stop_server(base):
        print("ZooKeeper stopped")
    else:
        print("ZooKeeper was not running")
    return 0


def running_connect_server(base: Path) -> dict[str, Any] | None:
    """The CLI-managed Spark Connect server's state if its process is alive and its port answers."""
    from airflow_epochs.embedded_spark_connect import listening

    state = _read_state(base, "spark-connect")
    if not state or not _alive(state) or not listening(int(state["port"])):
        return None
    return state


def start_connect_server(base: Path, port: int | None = None, master: str = "local[2]",
                         token: str | None = None) -> dict[str, Any]:
    """Start (or find) the detached Spark Connect server; returns its state (never the token: it stays
    in the 0600 file the state names).

    :param token: the token clients must send; by default the server's previous one, else a new one.
    """
    from airflow_epochs.embedded_spark_connect import SparkConnectServer

    current = running_connect_server(base)
    if current:
        return {**current, "already_running": True}
    server = SparkConnectServer(private_dir(base) / "spark-connect", port=port or _previous_port(base, "spark-connect"),
                                master=master, token=token).start()
    identity = server.identity()
    state = {"pid": server.pid, "port": server.port, "url": server.display_url, "master": master,
             "log": str(server.log_file), "token_file": str(server.token_file),
             "identity": identity.to_json() if identity else None}
    write_private(_state_file(base, "spark-connect"), json.dumps(state))
    return {**state, "already_running": False}


def connect_server_health(base: Path, state: dict[str, Any], *, timeout: float = 60.0) -> tuple[bool, str]:
    """A real query to the CLI-managed Spark Connect server, with the token from its 0600 file."""
    from airflow_epochs.embedded_spark_connect import TOKEN_FILE, probe

    token = read_private(base / "spark-connect" / TOKEN_FILE, secret=True).strip()
    healthy, why = probe(f"sc://localhost:{state['port']}/;token={token}", timeout=timeout)
    # the client's error line may repeat the connection string: the token never reaches the terminal
    return healthy, why.replace(token, "***") if token else why


def _connect_token(conn_id: str) -> str:
    """The token (password) of an Airflow ``spark_connect`` connection, for the server to require."""
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:  # noqa: BLE001 - Airflow raises several kinds for a missing connection
        raise CliError(f"cannot read connection {conn_id!r}: {type(exc).__name__}: {exc}") from None
    if not conn.password:
        raise CliError(f"connection {conn_id!r} has no password: the Spark Connect token goes there")
    return str(conn.password)


def stop_connect_server(base: Path) -> bool:
    # The server leads its own process group (spark-submit and what it starts): stopped as a group.
    return _stop_recorded(base, "spark-connect", group=True)


def _cmd_spark_connect(args: argparse.Namespace) -> int:
    from airflow_epochs.embedded_spark_connect import SparkConnectStartError

    base = state_dir(args.state_dir)
    if args.action == "start":
        token = _connect_token(args.conn_id) if args.conn_id else None
        try:
            state = start_connect_server(base, args.port, args.master, token=token)
        except ValueError as exc:  # a malformed token from the connection (never shown)
            raise CliError(f"connection {args.conn_id!r}: {exc}") from None
        except SparkConnectStartError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        verb = "already running" if state["already_running"] else "started"
        print(f"Spark Connect {verb} at {state['url']} (pid {state['pid']}, master {state['master']}, "
              f"log {state['log']})")
        print(f"clients authenticate with the token in {state.get('token_file')} (an Airflow spark_connect "
              "connection: host localhost, that port, the token as its password)")
        return 0
    if args.action == "status":
        running = running_connect_server(base)
        if running is None:
            print("Spark Connect is not running")
            return 1
        healthy, why = connect_server_health(base, running, timeout=args.probe_timeout)
        if not healthy:  # the pid lives and the port listens, yet a query fails: say so
            print(f"Spark Connect UNHEALTHY at {running['url']} (pid {running['pid']}): {why}")
            return 1
        print(f"Spark Connect running at {running['url']} (pid {running['pid']}, master {running['master']}; "
              "answered a query)")
        return 0
    print("Spark Connect stopped" if stop_connect_server(base) else "Spark Connect was not running")
    return 0


def zookeeper_settings(args: argparse.Namespace) -> Any:
    """The connection settings of a pipeline command, built exactly as the ZooKeeperHook builds them:
    from the Airflow connection ``--conn-id``, or from ``--hosts`` (else the CLI's embedded server),
    ``--digest-user`` with ``$AIRFLOW_EPOCHS_ZK_PASSWORD``, and the TLS options."""
    from airflow_epochs.zk_settings import InvalidConnection, ZooKeeperSettings

    direct = [flag for flag, value in (("--hosts", args.hosts), ("--digest-user", args.digest_user),
                                       ("--tls", args.tls), ("--ca", args.ca)) if value]
    if args.conn_id:
        if direct:
            raise CliError(f"--conn-id cannot be combined with {', '.join(direct)}: the connection says it all")
        from airflow_epochs.hooks.zookeeper import ZooKeeperHook

        try:
            return ZooKeeperHook(args.conn_id).settings
        except InvalidConnection as exc:
            raise CliError(f"connection {args.conn_id!r}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - Airflow raises several kinds for a missing connection
            raise CliError(f"cannot read connection {args.conn_id!r}: {type(exc).__name__}: {exc}") from None
    hosts = args.hosts or (running_server(state_dir(args.state_dir)) or {}).get("hosts")
    if not hosts:
        raise CliError("no --hosts or --conn-id given and no embedded ZooKeeper running")
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
        return ZooKeeperSettings.from_fields(host=hosts, login=args.digest_user, password=password if
                                             args.digest_user else None, extra=extra)
    except InvalidConnection as exc:
        raise CliError(str(exc)) from None


@contextlib.contextmanager
def _client(args: argparse.Namespace) -> Iterator[Any]:
    """A started kazoo client for a pipeline command, closed afterwards."""
    settings = zookeeper_settings(args)
    client = settings.start_client(timeout=min(args.connect_timeout, settings.connection_timeout))
    try:
        yield client
    finally:
        client.stop()
        client.close()


@contextlib.contextmanager
def _ledger(args: argparse.Namespace) -> Iterator[Any]:
    """A ledger of ``args.pipeline`` on the command's connection, closed afterwards."""
    from airflow_epochs.coordination import DEFAULT_ROOT, EpochLedger, validate_name, validate_root

    validate_name("pipeline", args.pipeline)
    root = validate_root(args.root or DEFAULT_ROOT)
    with _client(args) as client:
        yield EpochLedger(client, args.pipeline, root=root)


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit status 2."""


def _cmd_history(args: argparse.Namespace) -> int:
    with _ledger(args) as ledger:
        for event in ledger.history(since_seq=args.since, limit=args.limit):
            detail = " ".join(f"{k}={v}" for k, v in sorted(event.detail.items()) if k != "config")
            print(f"{event.seq:>8}  {event.zxid:>12x}  {event.event:<18} {detail}")
    return 0


def _cmd_compact(args: argparse.Namespace) -> int:
    with _ledger(args) as ledger:
        report = ledger.compact(max_epochs=args.max_epochs)
    kept = f"; kept in full for their snapshots: {list(report.kept)}" if report.kept else ""
    print(f"compacted through epoch {report.through}: {len(report.compacted)} epoch(s) removed now, "
          f"{report.znodes_deleted} znodes and {report.events_pruned} history events deleted{kept}")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from airflow_epochs.views.status import pipeline_status, render

    with _ledger(args) as ledger:
        print(render(pipeline_status(ledger, recent=args.recent)))
    return 0


def _cmd_timeline(args: argparse.Namespace) -> int:
    from airflow_epochs.views.timeline import draw

    epochs = _epoch_range(args.epochs) if args.epochs else None
    for out in args.out:
        _check_output(out)
    with _ledger(args) as ledger:
        try:
            found = draw(ledger, args.out, epochs=epochs)
        except ValueError as exc:
            raise CliError(str(exc)) from None
    lanes = sorted({s.lane for s in found})
    print(f"timeline of {len({s.epoch for s in found})} epochs, lanes {', '.join(lanes)}: {', '.join(args.out)}")
    return 0


# -- analyze: Blazes coordination analysis of a DAG ----------------------------------------------

ANALYZE_FORMATS = ("table", "json", "dot", "png")


def _cmd_analyze(args: argparse.Namespace) -> int:
    """Exit 0 when every order-sensitive task is sealed or ordered, 1 on under-coordination."""
    if args.format == "png" and not args.out:
        raise CliError("--format png needs --out FILE")
    from airflow_epochs.analysis import analyse_target
    from airflow_epochs.analysis.report import (
        find_bench_file,
        render_dot,
        render_json,
        render_png,
        render_table,
        sealing_figure,
    )

    results = [r for target in args.targets for r in analyse_target(target, dags_folder=args.dags_folder)]
    if args.bench:
        bench: Path | None = Path(args.bench)
    else:
        bench = find_bench_file([Path.cwd(), *(Path(r.fileloc).parent for r in results if r.fileloc)])
    figure = sealing_figure(bench)
    text = None
    try:
        if args.format == "png":
            render_png(results, args.out)
        elif args.format == "json":
            text = json.dumps(render_json(results, figure), indent=2) + "\n"
        elif args.format == "dot":
            text = render_dot(results)
        else:
            text = render_table(results, figure)
        if text is not None and args.out:
            Path(args.out).write_text(text)
    except ImportError:
        raise CliError("--format png needs matplotlib (pip install 'airflow-provider-epochs[examples]')") from None
    except OSError as exc:
        raise CliError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    if text is not None and not args.out:
        sys.stdout.write(text)
    under = [f for r in results for f in r.analysis.under]
    for finding in under:
        print(f"under-coordination: task {finding.component!r}: missing {finding.missing}", file=sys.stderr)
    if args.out:
        over = sum(len(r.analysis.over) for r in results)
        print(f"{args.format} written to {args.out}: {len(results)} DAG(s), {len(under)} under-coordinated "
              f"path(s), {over} over-coordination warning(s)")
    return 1 if under else 0


def _analyze_args(sub: Any) -> None:
    analyze = sub.add_parser("analyze", help="Blazes coordination analysis of a DAG: which tasks need a seal, an "
                             "order or nothing (exit 1 on under-coordination)")
    analyze.add_argument("targets", nargs="+", metavar="DAG_FILE_OR_ID",
                         help="a DAG file or folder, or a DAG id in the DAGs folder (several allowed)")
    analyze.add_argument("--format", choices=ANALYZE_FORMATS, default="table", help="output format (default table)")
    analyze.add_argument("--out", help="write the report to FILE (required for png)")
    analyze.add_argument("--bench", help="benchmark results whose sealing figure warnings cite (default: the "
                         "nearest .epochs/bench.json)")
    analyze.add_argument("--dags-folder", help="where to look a DAG id up (default: Airflow's dags_folder)")
    analyze.set_defaults(func=_cmd_analyze)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return int(text)


def _non_negative(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, not {text!r}")
    return int(text)


def _epoch_range(text: str) -> list[int]:
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


def _check_output(path: str) -> None:
    """Refuse an output file that cannot be written, before anything is read or drawn."""
    target = Path(path)
    if target.suffix not in (".png", ".html"):
        raise CliError(f"--out {path!r} must end in .png or .html")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise CliError(f"--out {path!r}: folder {str(folder)!r} does not exist")
    if target.is_dir() or not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise CliError(f"--out {path!r} is not writable")


def _cmd_acl(args: argparse.Namespace) -> int:
    from airflow_epochs.coordination import (
        DEFAULT_ROOT,
        PipelinePaths,
        repair_pipeline_acls,
        validate_name,
        validate_root,
        verify_pipeline_acls,
    )
    from airflow_epochs.coordination.acl import audit_pipeline_acls, protects_what_it_creates

    validate_name("pipeline", args.pipeline)
    paths = PipelinePaths(args.pipeline, validate_root(args.root or DEFAULT_ROOT))
    with _client(args) as client:
        if not protects_what_it_creates(client):
            raise CliError("ACLs can be checked and repaired only with credentials that protect what they "
                           f"create: --digest-user with ${PASSWORD_ENV}, or --conn-id of a connection with a "
                           "login, a password and use_acl")
        if args.action == "check":
            _report_acls(args.pipeline, audit_pipeline_acls(client, paths))
            print(f"pipeline {args.pipeline!r}: only this connection's credentials can write anything under "
                  f"{paths.base}")
            return 0
        changed = repair_pipeline_acls(client, paths)  # names every node it may not change (InsecureAcl)
        verify_pipeline_acls(client, paths)
        _report_acls(args.pipeline, audit_pipeline_acls(client, paths))
    print(f"pipeline {args.pipeline!r}: ACL set on {len(changed)} nodes; records written while it was open stay: "
          f"read 'airflow-epochs history {args.pipeline}'")
    return 0


def _report_acls(pipeline: str, findings: Sequence[Any]) -> None:
    """Print every node others may write (one line each) and fail, or do nothing when there is none."""
    if not findings:
        return
    for finding in findings:
        print(f"insecure: {finding}")
    raise CliError(f"pipeline {pipeline!r}: {len(findings)} node(s) writable or administrable by others (listed "
                   f"above), first {findings[0]}; run 'airflow-epochs acl repair {pipeline}' with the owner's "
                   "credentials")


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
    parser.add_argument("--conn-id", help="an Airflow connection of type zookeeper (hosts, chroot, credentials, TLS)")
    parser.add_argument("--hosts", help="ZooKeeper connect string, with an optional chroot (default: the embedded "
                        "server)")
    parser.add_argument("--digest-user", help=f"digest user; its password comes from ${PASSWORD_ENV}")
    parser.add_argument("--tls", action="store_true", help="connect with TLS")
    parser.add_argument("--ca", help="CA certificate file (PEM) for TLS")
    parser.add_argument("--certfile", help="client certificate (PEM) for TLS")
    parser.add_argument("--keyfile", help="client key (PEM) for TLS")
    parser.add_argument("--no-check-hostname", action="store_true", help="do not check the server's host name")
    parser.add_argument("--connect-timeout", type=_positive_seconds, default=15.0,
                        help="seconds to wait for ZooKeeper (default 15)")
    parser.add_argument("--root", help="znode under which pipelines live")


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (exit status 2), like every other error of the CLI."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="airflow-epochs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", help=f"state folder (default ${STATE_ENV} or ~/.airflow-epochs)")
    sub = parser.add_subparsers(dest="command", required=True)
    zk = sub.add_parser("zookeeper", help="start, stop or check the embedded ZooKeeper server")
    zk.add_argument("action", choices=["start", "stop", "status"])
    zk.add_argument("--port", type=_port, help="client port (default: the previous one, else a free one)")
    zk.set_defaults(func=_cmd_zookeeper)
    connect = sub.add_parser("spark-connect", help="start, stop or check a warm Spark Connect server")
    connect.add_argument("action", choices=["start", "stop", "status"])
    connect.add_argument("--port", type=_port, help="gRPC port (default: a free one)")
    connect.add_argument("--master", type=_master, default="local[2]",
                         help="Spark master of the server (default local[2])")
    connect.add_argument("--conn-id", help="take the token clients must send from this Airflow spark_connect "
                         "connection's password (default: the previous token, else a new one)")
    connect.add_argument("--probe-timeout", type=_positive_seconds, default=60.0,
                         help="status: seconds the test query may take before the server counts as unhealthy")
    connect.set_defaults(func=_cmd_spark_connect)
    history = sub.add_parser("history", help="print a pipeline's recorded state changes (seq, zxid, event)")
    _pipeline_args(history)
    history.add_argument("--since", type=_non_negative, default=-1, metavar="SEQ",
                         help="only the events after this sequence number (a cursor from an earlier call)")
    history.add_argument("--limit", type=_positive, help="at most this many events")
    history.set_defaults(func=_cmd_history)
    compact = sub.add_parser("compact", help="apply the pipeline's retain_epochs now (the coordinator also does "
                             "this as it opens epochs)")
    _pipeline_args(compact)
    compact.add_argument("--max-epochs", type=_positive, help="compact at most this many epochs")
    compact.set_defaults(func=_cmd_compact)
    status = sub.add_parser("status", help="frontier, leader, open epochs, votes, seals and barriers as a table")
    _pipeline_args(status)
    status.add_argument("--recent", type=_recent, metavar="N", default=1,
                        help="also show the last N sealed epochs (default 1, at most 1000)")
    status.set_defaults(func=_cmd_status)
    timeline = sub.add_parser("timeline", help="draw each epoch's stages on a time axis (PNG and/or HTML)")
    _pipeline_args(timeline)
    timeline.add_argument("--out", action="append", required=True, help="output file, .png or .html (repeatable)")
    timeline.add_argument("--epochs", help="only these epochs, e.g. 3..9")
    timeline.set_defaults(func=_cmd_timeline)
    _analyze_args(sub)
    acl = sub.add_parser("acl", help="check, or repair, that only this connection's credentials can write a "
                         "pipeline's subtree")
    acl.add_argument("action", choices=["check", "repair"])
    _pipeline_args(acl)
    acl.set_defaults(func=_cmd_acl)
    from airflow_epochs.tables.cli_command import add_table_command

    add_table_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from kazoo.exceptions import KazooException, NoAuthError

    from airflow_epochs.coordination import AccessDenied, EpochsError
    from airflow_epochs.private_files import UnsafeState
    from airflow_epochs.redaction import redact
    from airflow_epochs.zk_settings import InvalidConnection

    args = build_parser().parse_args(argv)
    # kazoo's reconnect chatter would bury the one line that says what is wrong.
    kazoo_log = logging.getLogger("airflow_epochs.kazoo")
    quiet, propagate = logging.NullHandler(), kazoo_log.propagate
    kazoo_log.addHandler(quiet)
    kazoo_log.propagate = False
    try:
        return int(args.func(args))
    except (NoAuthError, AccessDenied):  # the one hint a command-line user needs
        message = ("ZooKeeper refused access (NoAuth): the pipeline is protected by an ACL; give its credentials "
                   f"(--conn-id, or --digest-user with ${PASSWORD_ENV})")
    except (CliError, EpochsError, InvalidConnection, UnsafeState) as exc:
        message = str(exc)
    except KazooException as exc:
        message = f"ZooKeeper: {type(exc).__name__}: {exc}"
    except OSError as exc:
        message = f"{type(exc).__name__}: {exc}"
    finally:
        kazoo_log.removeHandler(quiet)
        kazoo_log.propagate = propagate
    print(f"error: {redact(' '.join(message.split()))}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
