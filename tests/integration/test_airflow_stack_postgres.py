"""The scheduler-driven tests' PostgreSQL (tests/helpers/airflow_stack.py) keeps its data and socket in
a folder of its own, outside pytest's base folder (whose mode another pytest session of the machine
resets to 0700 while the server runs), serves on a copy of the migrated template, and leaves nothing
behind after ``stop()``."""

from __future__ import annotations

import os

import pytest
from airflow_stack import AirflowStack

pytestmark = [pytest.mark.integration]


def test_the_stack_database_lives_outside_pytests_folder_and_goes_with_stop(tmp_path, tmp_path_factory,
                                                                            airflow_pg_template):
    stack = AirflowStack(tmp_path / "stack", template=airflow_pg_template)
    try:
        stack.start_postgres()
        folder = stack.pg_folder
        assert folder is not None and folder.is_dir()
        pytest_root = tmp_path_factory.getbasetemp().parent
        assert pytest_root not in folder.parents and tmp_path not in folder.parents
        # what another pytest session does to the folder the stack was given: the server goes on serving
        os.chmod(tmp_path / "stack", 0o700)
        os.chmod(tmp_path, 0o700)
        assert stack.query("SELECT count(*) FROM dag") == [(0,)]  # Airflow's tables: the migrated template
        server = stack.procs["postgres"]
    finally:
        stack.stop()
    assert server.poll() is not None
    assert not folder.exists() and stack.pg_folder is None
    assert (tmp_path / "stack" / "postgres.log").exists()  # the log stays with the test's files
