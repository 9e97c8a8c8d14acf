"""The tests' Airflow deployment (:class:`airflow_stack.AirflowStack`) as a production team runs it:
its metadata database on a password-protected PostgreSQL (:class:`postgres_server.PostgresServer`)
and, given a broker, the CeleryExecutor (Redis), for :mod:`cluster_topology`."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from airflow_stack import AirflowStack
from postgres_server import PostgresServer

from airflow_epochs.process_identity import launch_environment


class CeleryStack(AirflowStack):
    """:class:`AirflowStack` on a password-protected PostgreSQL, with the CeleryExecutor on ``broker``
    (or the LocalExecutor when ``broker`` is None)."""

    def __init__(self, base: Path, *, env: dict[str, str], broker: str | None,
                 component_env: dict[str, dict[str, str]] | None = None) -> None:
        super().__init__(base, env=env)
        self.broker = broker
        self.pg: PostgresServer | None = None
        self.component_env = component_env or {}  # a component's own additions to the environment, by name

    def spawn(self, name: str, argv: list[str], *, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.Popen[bytes]:
        if env is None and name in self.component_env:
            env = {**self.env, **self.component_env[name]}
        return super().spawn(name, argv, env=env, cwd=cwd)

    def start_postgres(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        # Not under base: PostgreSQL runs as the postgres user (see AirflowStack).
        self.pg_folder = Path(tempfile.mkdtemp(prefix="airflow-epochs-cluster-pg-"))
        self.pg = PostgresServer(self.pg_folder)
        self.pg.port = self.pg_port
        self.pg.start()
        self.pg.database("airflow")
        assert self.pg.proc is not None
        self.procs["postgres"] = self.pg.proc

    @property
    def db_password(self) -> str:
        if self.pg is None:
            raise RuntimeError("PostgreSQL has not been started")
        return self.pg.password

    @property
    def env(self) -> dict[str, str]:
        # a launch nonce in each process's environment: what `down` and the faults check a pid by
        env = launch_environment(super().env)
        user = PostgresServer.user
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = \
            f"postgresql+psycopg2://{user}:{self.db_password}@127.0.0.1:{self.pg_port}/airflow"
        if self.broker is not None:
            env.update({
                "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                "AIRFLOW__CELERY__BROKER_URL": self.broker,
                "AIRFLOW__CELERY__RESULT_BACKEND":
                    f"db+postgresql+psycopg2://{user}:{self.db_password}@127.0.0.1:{self.pg_port}/airflow",
                "AIRFLOW__CELERY__WORKER_CONCURRENCY": "2",
            })
        return env

    def query(self, sql: str, *params: object) -> list[tuple[object, ...]]:
        import psycopg2

        with psycopg2.connect(host="127.0.0.1", port=self.pg_port, user=PostgresServer.user,
                              password=self.db_password, dbname="airflow") as conn, conn.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall())
