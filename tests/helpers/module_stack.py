"""What the scheduler-driven system tests share: one deployment a test module (``yield from
module_stack(...)`` in a module-scoped fixture), and waiting for a condition with the evidence on timeout."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from airflow_stack import REPO, AirflowStack, postgres_bin


def module_stack(base: Path, template: Path, env: dict[str, str], dag_files: Sequence[str],
                 processes: Sequence[tuple[str, list[str]]] = ()) -> Iterator[AirflowStack]:
    """A deployment on a copy of the migrated PostgreSQL ``template`` with ``env``, the DAG files
    ``dag_files`` (names in tests/dags) and, beside its own processes, ``processes`` (name, Airflow
    arguments: a second scheduler or triggerer); stopped when the fixture ends, or when starting fails.
    No PostgreSQL server binaries is a failure, never a skip."""
    if postgres_bin() is None:
        pytest.fail("PostgreSQL server binaries not installed: .ci/run installs Debian's postgresql")
    deployment = AirflowStack(base, template=template, env=env)
    try:
        deployment.start([REPO / "tests" / "dags" / name for name in dag_files])
        for name, argv in processes:
            deployment.spawn(name, argv)
        yield deployment
    finally:
        deployment.stop()


def wait_until(predicate: Callable[[], object], timeout: float, what: Callable[[], object], *,
               every: float = 2.0) -> None:
    """Return once ``predicate()`` is true; fail with ``what()`` (the evidence) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what()
        time.sleep(every)
