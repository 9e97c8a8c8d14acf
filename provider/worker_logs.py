"""A worker's task-log server bound to one address of the operator's choice, never every interface.

Airflow 3.3's ``airflow celery worker`` starts ``serve_logs``, which binds every interface (``host=""``,
no setting changes it), so on a shared host every local user and every host on the network reaches it.
Start each worker with ``--skip-serve-logs`` and run this beside it instead::

    python -I -m airflow_epochs.worker_logs --host 10.0.0.5 --port 8793

It serves Airflow's own log application (``airflow.utils.serve_logs.log_server``), unchanged: every
request must carry a token the API server signs with the deployment's ``[api] secret_key`` for that one
file, and the files come from the worker's ``[logging] base_log_folder``. The API server fetches a
running task's log from ``http://<the task's hostname>:<[logging] worker_log_server_port>/log/...``, so
the task's hostname must be the address served: in the worker's environment set
``AIRFLOW__CORE__HOSTNAME_CALLABLE=airflow_epochs.worker_logs.worker_hostname`` and
``AIRFLOW_EPOCHS_LOG_SERVER_HOST`` to that address (:func:`worker_hostname`).

A triggerer's log server is the same application and binds every interface too (``airflow triggerer``
starts it on ``[logging] trigger_log_server_port``); the API server fetches a deferred task's trigger log
from ``http://<the triggerer job's hostname>:<that port>/log/...``. Start the triggerer with
``--skip-serve-logs``, the same two variables in its environment, and beside it::

    python -I -m airflow_epochs.worker_logs --component triggerer --host 10.0.0.6
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys

HOST_ENV = "AIRFLOW_EPOCHS_LOG_SERVER_HOST"
#: the component whose logs a server serves -> the ``[logging]`` setting of its port
PORT_SETTINGS = {"worker": "worker_log_server_port", "triggerer": "trigger_log_server_port"}


def serving_address(host: str) -> str:
    """``host`` as the one address to bind: an IP address literal, not a wildcard or multicast address.

    :param host: the address, e.g. ``10.0.0.5``, ``127.0.0.2`` or ``::1``.
    :raises ValueError: naming ``host``, when it is not such an address.
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"the log server's address must be an IP address literal, not {host!r}") from None
    if address.is_unspecified or address.is_multicast:
        raise ValueError(f"the log server binds one address, never every interface: not {host!r}")
    return str(address)


def serving_port(port: int) -> int:
    """``port`` checked: 1 to 65535.

    :raises ValueError: naming ``port`` otherwise.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"the log server's port must be an integer from 1 to 65535, not {port!r}")
    return port


def worker_hostname() -> str:
    """Airflow's ``[core] hostname_callable`` for a worker whose log server this module runs: the address
    in ``AIRFLOW_EPOCHS_LOG_SERVER_HOST`` (the one the API server must reach), else Airflow's default.

    :raises ValueError: naming the value, when the variable holds no address :func:`serving_address` takes.
    """
    host = os.environ.get(HOST_ENV)
    if host is None:
        from airflow.utils.net import getfqdn

        return str(getfqdn())
    return serving_address(host)


def serve(host: str, port: int) -> None:
    """Serve the worker's task logs on ``host``:``port`` only, until stopped (Airflow's application and
    its token check).

    :param host: one IP address (:func:`serving_address`).
    :param port: the deployment's ``[logging] worker_log_server_port``.
    :raises ValueError: bad ``host`` or ``port``, before anything is bound.
    """
    host, port = serving_address(host), serving_port(port)
    import uvicorn

    # log_config=None keeps Airflow's logging set-up; access_log=False: the paths name tasks, not needed.
    uvicorn.run("airflow.utils.serve_logs.log_server:get_app", host=host, port=port, log_config=None,
                access_log=False, log_level="info")


def main(argv: list[str] | None = None) -> int:
    """``python -I -m airflow_epochs.worker_logs --host ADDRESS [--port PORT] [--component triggerer]``."""
    parser = argparse.ArgumentParser(prog="python -m airflow_epochs.worker_logs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default=os.environ.get(HOST_ENV),
                        help=f"the one address to bind (default: ${HOST_ENV})")
    parser.add_argument("--port", type=int, default=None,
                        help="the port (default: [logging] worker_log_server_port, or trigger_log_server_port "
                        "for a triggerer)")
    parser.add_argument("--component", choices=sorted(PORT_SETTINGS), default="worker",
                        help="whose logs: a Celery worker's (default) or a triggerer's; chooses the default port")
    args = parser.parse_args(argv)
    if args.host is None:
        parser.error(f"--host (or {HOST_ENV}) is required: the log server binds one address, never every interface")
    try:
        host = serving_address(args.host)
        port = args.port
        if port is None:
            from airflow.configuration import conf

            port = conf.getint("logging", PORT_SETTINGS[args.component])
        port = serving_port(port)
    except ValueError as exc:
        parser.error(str(exc))
    serve(host, port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
