"""Issue 48, items 1-2: no secret file is readable by another local user while it exists, however briefly.

PostgreSQL's ``initdb --pwfile`` reads the superuser's password from a file; the tests' PostgreSQL helper
(which ``scripts/cluster.sh up`` starts its metadata database with too) and the tests' Airflow deployment
(which ``demo.sh --serve`` runs) wrote it with the caller's umask (0644) into a folder the postgres account
may traverse (0711), and a second user polling for it read it while ``initdb`` ran, then logged in as the
superuser. Now the file is created 0600 before a byte is written, in a new 0700 folder of the account that
reads it. Each start here is raced by a second local user polling every folder of the temporary directory
for the files our code writes (the old name and the new one); the control shows the same poller reading
a file left as the old code left it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from airflow_stack import AirflowStack, postgres_bin
from intruder import Intruder, second_user
from postgres_server import running_postgres
from secret_poller import polling_for_secrets

pytestmark = [pytest.mark.integration]

TMP = tempfile.gettempdir()  # where both helpers put PostgreSQL's folder (mkdtemp)
NAMES = ("pwfile", "initdb-secret/pwfile")  # where the old and the new code put initdb's password file


@pytest.fixture(scope="module")
def intruder() -> Iterator[Intruder]:
    if postgres_bin() is None:
        pytest.fail("the PostgreSQL server is needed: scripts/system_deps.sh installs it")
    with second_user() as user:
        yield user


def test_the_poller_reads_a_password_file_left_as_before(intruder):
    """The control: a password file written with the umask in a folder others may traverse, as the helpers
    wrote it, is read by the second user's poller."""
    folder = Path(tempfile.mkdtemp(prefix="airflow-epochs-pg-"))
    try:
        os.chmod(folder, 0o711)
        with polling_for_secrets(intruder, [TMP], NAMES) as polled:
            (folder / "pwfile").write_text("control-password\n")
            os.chmod(folder / "pwfile", 0o644)
            time.sleep(2)  # the old file lived as long as initdb ran: seconds
        assert polled.holding("control-password"), polled
    finally:
        shutil.rmtree(folder)


def test_the_tests_postgres_password_is_never_readable_while_initdb_runs(intruder):
    """The tests' PostgreSQL helper (also the cluster's metadata database): raced from before the start."""
    with polling_for_secrets(intruder, [TMP], NAMES) as polled, running_postgres() as server:
        password = server.password
    assert polled.rounds >= 20, polled  # it polled all through the start
    assert polled.holding(password) == {}, polled.holding(password)


def test_the_deployments_postgres_password_is_never_readable_while_initdb_runs(intruder, tmp_path):
    """The tests' Airflow deployment's PostgreSQL (``demo.sh --serve``'s), initdb'd from nothing."""
    stack = AirflowStack(tmp_path / "stack")
    try:
        with polling_for_secrets(intruder, [TMP], NAMES) as polled:
            stack.start_postgres()
    finally:
        stack.stop()
    assert polled.rounds >= 20, polled
    assert polled.holding(stack.pg_password) == {}, polled.holding(stack.pg_password)
