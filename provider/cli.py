"""``airflow-epochs``: manage the embedded ZooKeeper and look at pipelines.

::

    airflow-epochs zookeeper start [--port N]   # detached server, data kept in the state dir
    airflow-epochs zookeeper status
    airflow-epochs zookeeper stop
    airflow-epochs spark-connect start [--port N] [--master local[2]]   # warm Spark Connect server
    airflow-epochs spark-connect status
    airflow-epochs spark-connect stop
    airflow-epochs history PIPELINE --hosts 127.0.0.1:2181
    airflow-epochs status PIPELINE [--hosts H]                  # tables: frontier, leader, votes, barriers
    airflow-epochs timeline PIPELINE --out t.png --out t.html   # each epoch's stages on a time axis
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from airflow_epochs.embedded_zookeeper import (
    EmbeddedZooKeeper,
    ZooKeeperError,
    four_letter_word,
    stop_pid,
)

STATE_ENV = "AIRFLOW_EPOCHS_HOME"


def state_dir(explicit: str | None) -> Path:
    """Where the CLI keeps the embedded server's data and pid: ``--state-dir``, ``$AIRFLOW_EPOCHS_HOME``
    or ``~/.airflow-epochs``."""
    return Path(explicit or os.environ.get(STATE_ENV) or Path.home() / ".airflow-epochs").resolve()


def _state_file(base: Path, server: str = "zookeeper") -> Path:
    return base / f"{server}.json"


def _read_state(base: Path, server: str = "zookeeper") -> dict[str, Any] | None:
    """What the CLI recorded when it started ``server`` (``zookeeper`` or ``spark-connect``)."""
    try:
        data: dict[str, Any] = json.loads(_state_file(base, server).read_text())
    except (OSError, ValueError):
        return None
    return data


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_server(base: Path) -> dict[str, Any] | None:
    """The state of the CLI-managed server if it is running and serving, else None."""
    state = _read_state(base)
    if not state or not _alive(int(state["pid"])):
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
    server = EmbeddedZooKeeper(directory=base / "zookeeper", port=port or _previous_port(base))
    server.start()
    state = {"pid": server.pid, "port": server.port, "hosts": server.hosts, "directory": str(server.directory)}
    base.mkdir(parents=True, exist_ok=True)
    _state_file(base).write_text(json.dumps(state))
    return {**state, "mode": "standalone", "already_running": False}


def _previous_port(base: Path) -> int | None:
    # Reuse the last port so connections configured against it keep working across restarts.
    state = _read_state(base)
    return int(state["port"]) if state and "port" in state else None


def stop_server(base: Path) -> bool:
    state = _read_state(base)
    if not state:
        return False
    stopped = stop_pid(int(state["pid"])) if _alive(int(state["pid"])) else False
    return stopped


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
        state = running_server(base)
        if state is None:
            print("ZooKeeper is not running")
            return 1
        print(f"ZooKeeper running at {state['hosts']} (pid {state['pid']}, mode {state['mode']})")
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
    if not state or not _alive(int(state["pid"])) or not listening(int(state["port"])):
        return None
    return state


def start_connect_server(base: Path, port: int | None = None, master: str = "local[2]") -> dict[str, Any]:
    """Start (or find) the detached Spark Connect server; returns its state."""
    from airflow_epochs.embedded_spark_connect import SparkConnectServer

    current = running_connect_server(base)
    if current:
        return {**current, "already_running": True}
    server = SparkConnectServer(base / "spark-connect", port=port, master=master).start()
    state = {"pid": server.pid, "port": server.port, "url": server.url, "master": master,
             "log": str(server.log_file)}
    _state_file(base, "spark-connect").write_text(json.dumps(state))
    return {**state, "already_running": False}


def stop_connect_server(base: Path) -> bool:
    from airflow_epochs.embedded_spark_connect import stop_server_pid

    state = _read_state(base, "spark-connect")
    return bool(state) and _alive(int(state["pid"])) and stop_server_pid(int(state["pid"]))


def _cmd_spark_connect(args: argparse.Namespace) -> int:
    from airflow_epochs.embedded_spark_connect import SparkConnectStartError

    base = state_dir(args.state_dir)
    if args.action == "start":
        try:
            state = start_connect_server(base, args.port, args.master)
        except SparkConnectStartError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        verb = "already running" if state["already_running"] else "started"
        print(f"Spark Connect {verb} at {state['url']} (pid {state['pid']}, master {state['master']}, "
              f"log {state['log']})")
        return 0
    if args.action == "status":
        state = running_connect_server(base)
        if state is None:
            print("Spark Connect is not running")
            return 1
        print(f"Spark Connect running at {state['url']} (pid {state['pid']}, master {state['master']})")
        return 0
    print("Spark Connect stopped" if stop_connect_server(base) else "Spark Connect was not running")
    return 0


@contextlib.contextmanager
def _ledger(args: argparse.Namespace) -> Iterator[Any]:
    """A ledger of ``args.pipeline`` on ``--hosts`` (or the CLI's embedded server), closed afterwards."""
    from kazoo.client import KazooClient

    from airflow_epochs.coordination import DEFAULT_ROOT, EpochLedger

    hosts = args.hosts or (running_server(state_dir(args.state_dir)) or {}).get("hosts")
    if not hosts:
        raise CliError("no --hosts given and no embedded ZooKeeper running")
    client = KazooClient(hosts=hosts)
    client.start(timeout=15)
    try:
        yield EpochLedger(client, args.pipeline, root=args.root or DEFAULT_ROOT)
    finally:
        client.stop()
        client.close()


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit status 2."""


def _cmd_history(args: argparse.Namespace) -> int:
    with _ledger(args) as ledger:
        for event in ledger.history():
            detail = " ".join(f"{k}={v}" for k, v in sorted(event.detail.items()) if k != "config")
            print(f"{event.zxid:>12x}  {event.event:<18} {detail}")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from airflow_epochs.status import pipeline_status, render

    with _ledger(args) as ledger:
        print(render(pipeline_status(ledger, recent=args.recent)))
    return 0


def _cmd_timeline(args: argparse.Namespace) -> int:
    from airflow_epochs.timeline import draw

    epochs = None
    if args.epochs:
        first, _, last = args.epochs.partition("..")
        if not (first.isdigit() and (not last or last.isdigit())):
            raise CliError(f"--epochs must look like 3..9 or 5, not {args.epochs!r}")
        epochs = list(range(int(first), int(last or first) + 1))
    with _ledger(args) as ledger:
        try:
            found = draw(ledger, args.out, epochs=epochs)
        except ValueError as exc:
            raise CliError(str(exc)) from None
    lanes = sorted({s.lane for s in found})
    print(f"timeline of {len({s.epoch for s in found})} epochs, lanes {', '.join(lanes)}: {', '.join(args.out)}")
    return 0


def _pipeline_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline")
    parser.add_argument("--hosts", help="ZooKeeper connect string, with an optional chroot (default: the embedded "
                        "server)")
    parser.add_argument("--root", help="znode under which pipelines live")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airflow-epochs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", help=f"state folder (default ${STATE_ENV} or ~/.airflow-epochs)")
    sub = parser.add_subparsers(dest="command", required=True)
    zk = sub.add_parser("zookeeper", help="start, stop or check the embedded ZooKeeper server")
    zk.add_argument("action", choices=["start", "stop", "status"])
    zk.add_argument("--port", type=int, help="client port (default: the previous one, else a free one)")
    zk.set_defaults(func=_cmd_zookeeper)
    connect = sub.add_parser("spark-connect", help="start, stop or check a warm Spark Connect server")
    connect.add_argument("action", choices=["start", "stop", "status"])
    connect.add_argument("--port", type=int, help="gRPC port (default: a free one)")
    connect.add_argument("--master", default="local[2]", help="Spark master of the server (default local[2])")
    connect.set_defaults(func=_cmd_spark_connect)
    history = sub.add_parser("history", help="print a pipeline's recorded state changes")
    _pipeline_args(history)
    history.set_defaults(func=_cmd_history)
    status = sub.add_parser("status", help="frontier, leader, open epochs, votes, seals and barriers as a table")
    _pipeline_args(status)
    status.add_argument("--recent", type=int, default=1, help="also show the last N sealed epochs (default 1)")
    status.set_defaults(func=_cmd_status)
    timeline = sub.add_parser("timeline", help="draw each epoch's stages on a time axis (PNG and/or HTML)")
    _pipeline_args(timeline)
    timeline.add_argument("--out", action="append", required=True, help="output file, .png or .html (repeatable)")
    timeline.add_argument("--epochs", help="only these epochs, e.g. 3..9")
    timeline.set_defaults(func=_cmd_timeline)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from airflow_epochs.coordination import EpochsError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (CliError, EpochsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
