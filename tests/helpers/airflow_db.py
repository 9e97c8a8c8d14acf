"""A private copy of the tests' Airflow metadata database for `airflow dags test` subprocesses."""

from __future__ import annotations

from pathlib import Path


def private_airflow_db(airflow_home: Path, folder: Path) -> dict[str, str]:
    """Environment for an `airflow dags test` subprocess with its own copy of the metadata database
    (through SQLite's backup API, so the copy is consistent). Sharing this process's SQLite file
    with a subprocess run was seen to fail there with "database disk image is malformed" after a
    long session; the subprocess's run only needs the DAGs and ZooKeeper, not this process's rows."""
    import sqlite3

    folder.mkdir(parents=True, exist_ok=True)
    source = sqlite3.connect(airflow_home / "airflow.db")
    copy = sqlite3.connect(folder / "airflow.db")
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()
    return {"AIRFLOW_HOME": str(folder), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{folder / 'airflow.db'}",
            "AIRFLOW__CORE__DAGS_FOLDER": str(airflow_home / "dags")}

