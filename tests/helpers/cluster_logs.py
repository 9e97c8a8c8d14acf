"""Where the cluster's task and trigger logs are served from: each Celery worker and each triggerer has a
log server of ours (:mod:`airflow_epochs.worker_logs`, Airflow's own log application bound to one address)
on a loopback address of its own, as separate hosts would have, and gives that address as its hostname
(the one the API server fetches a running task's log, or a deferred task's trigger log, from)."""

from __future__ import annotations

import sys
from pathlib import Path

# the triggerers a deployment runs: two with Celery (as schedulers), one with the LocalExecutor
TRIGGERERS = ("triggerer", "triggerer-2")


def worker_address(index: int) -> str:
    """Celery worker ``index``'s address (1: 127.0.0.2, 2: 127.0.0.3)."""
    return f"127.0.0.{1 + index}"


def triggerer_address(index: int) -> str:
    """Triggerer ``index``'s address (1: 127.0.0.11, 2: 127.0.0.12)."""
    return f"127.0.0.{10 + index}"


def serving_env(address: str, logs: Path | None = None) -> dict[str, str]:
    """A worker's or triggerer's environment additions: its hostname is the address its log server binds;
    with ``logs``, its own log folder (shared with no other process, as on a host of its own)."""
    return {"AIRFLOW__CORE__HOSTNAME_CALLABLE": "airflow_epochs.worker_logs.worker_hostname",
            "AIRFLOW_EPOCHS_LOG_SERVER_HOST": address,
            **({"AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(logs)} if logs is not None else {})}


def log_server_argv(component: str, address: str, port: int) -> list[str]:
    """The log server's command for ``component`` (``worker`` or ``triggerer``) on ``address``:``port``."""
    return [sys.executable, "-I", "-m", "airflow_epochs.worker_logs", "--component", component, "--host", address,
            "--port", str(port)]
