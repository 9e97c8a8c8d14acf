"""An Airflow connection looked up from the command line, where Airflow's whole lookup applies.

Outside a task the Task SDK's lookup (``BaseHook.get_connection``, which the hooks use) reads secrets
backends and ``AIRFLOW_CONN_*`` variables only, never the metadata database: a connection made with
``airflow connections add`` (as the quickstart makes them) would not be found. The commands use
Airflow's own lookup instead, as ``airflow connections get`` does; inside a task it hands over to the
Task SDK by itself.
"""

from __future__ import annotations

from typing import Any

from airflow_epochs.coordination.base.errors import InvalidInput

__all__ = ["connection_outside_task"]


def connection_outside_task(conn_id: str) -> Any:
    """The Airflow connection ``conn_id`` from the secrets backends, the environment, then the metadata
    database.

    :raises InvalidInput: there is none, or it cannot be read (one line naming ``conn_id``).
    """
    import warnings

    from airflow.models.connection import Connection

    try:
        with warnings.catch_warnings():  # "use the SDK's Connection": its lookup is the one that misses the database
            warnings.filterwarnings("ignore", message=r".*get_connection_from_secrets.*", category=DeprecationWarning)
            return Connection.get_connection_from_secrets(conn_id)
    except Exception as exc:  # noqa: BLE001 - Airflow raises several kinds for a missing connection
        raise InvalidInput(f"cannot read connection {conn_id!r}: {type(exc).__name__}: {exc}") from None
