"""``airflow-epochs``: manage the embedded ZooKeeper and look at pipelines.

::

    airflow-epochs zookeeper start [--port N]   # detached server, data kept in the state dir
    airflow-epochs zookeeper status
    airflow-epochs zookeeper stop
    airflow-epochs history PIPELINE --hosts 127.0.0.1:2181
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
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


def _state_file(base: Path) -> Path:
    return base / "zookeeper.json"


def _read_state(base: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(_state_file(base).read_text())
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


def _cmd_history(args: argparse.Namespace) -> int:
    from kazoo.client import KazooClient

    from airflow_epochs.coordination import DEFAULT_ROOT, EpochLedger, EpochsError

    hosts = args.hosts or (running_server(state_dir(args.state_dir)) or {}).get("hosts")
    if not hosts:
        print("error: no --hosts given and no embedded ZooKeeper running", file=sys.stderr)
        return 2
    client = KazooClient(hosts=hosts)
    client.start(timeout=15)
    try:
        for event in EpochLedger(client, args.pipeline, root=args.root or DEFAULT_ROOT).history():
            detail = " ".join(f"{k}={v}" for k, v in sorted(event.detail.items()) if k != "config")
            print(f"{event.zxid:>12x}  {event.event:<18} {detail}")
    except EpochsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        client.stop()
        client.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airflow-epochs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", help=f"state folder (default ${STATE_ENV} or ~/.airflow-epochs)")
    sub = parser.add_subparsers(dest="command", required=True)
    zk = sub.add_parser("zookeeper", help="start, stop or check the embedded ZooKeeper server")
    zk.add_argument("action", choices=["start", "stop", "status"])
    zk.add_argument("--port", type=int, help="client port (default: the previous one, else a free one)")
    zk.set_defaults(func=_cmd_zookeeper)
    history = sub.add_parser("history", help="print a pipeline's recorded state changes")
    history.add_argument("pipeline")
    history.add_argument("--hosts", help="ZooKeeper connect string (default: the embedded server)")
    history.add_argument("--root", help="znode under which pipelines live")
    history.set_defaults(func=_cmd_history)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
