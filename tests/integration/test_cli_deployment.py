"""``airflow-epochs`` finds its deployment (no ``--hosts``, no ``--conn-id``) and cleans up after itself:
``list``, ``abort`` and ``delete``, on real ZooKeeper servers.

Where a command with no connection flags looks (``airflow_epochs.cli.deployment``): the running embedded
server of ``$AIRFLOW_EPOCHS_HOME``; that folder's stopped server, served for the one command; the Airflow
connection ``zookeeper_default``; else one line naming each place.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_epochs.cli import build_parser
from airflow_epochs.cli.maintenance import cmd_delete
from airflow_epochs.cli.state import CliError
from airflow_epochs.coordination import AttemptSuperseded, EpochLedger, PipelineConfig, PipelineNotFound
from airflow_epochs.private_files import private_dir

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "airflow-epochs")


def _clean_env(home: Path, **more: str) -> dict[str, str]:
    """No Airflow of the test session in sight (no AIRFLOW_HOME, no connections, a home of its own)."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and k != "HOME"}
    return {**keep, "HOME": str(home), **more}


def _cli(*argv: str, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *argv], env=env, capture_output=True, text=True, timeout=timeout)


def _sealed_pipeline(client, name: str, epochs: int = 2) -> EpochLedger:
    ledger = EpochLedger(client, name, owner="etl")
    ledger.create_pipeline(PipelineConfig({"orders": ("ingest",)}))
    for epoch in range(1, epochs + 1):
        ledger.vote(ledger.open_epoch(epoch), "orders", "ingest", {"rows": 10 * epoch})
    return ledger


def test_status_list_abort_and_delete_with_no_connection_flags(zk_server, tmp_path):
    """The session's server is the embedded server of ``$AIRFLOW_EPOCHS_HOME``: every command finds it."""
    name = f"cli-{secrets.token_hex(3)}"
    client = zk_server.client()
    try:
        ledger = _sealed_pipeline(client, name)
        attempt = ledger.open_epoch(3)  # a stray attempt: its process is gone
        env = _clean_env(tmp_path, AIRFLOW_EPOCHS_HOME=str(zk_server.base))
        status = _cli("status", name, env=env)
        assert status.returncode == 0, status.stderr
        assert f"pipeline {name}: frontier 2;" in status.stdout
        listed = _cli("list", env=env)
        assert listed.returncode == 0, listed.stderr
        row = next(line for line in listed.stdout.splitlines() if line.startswith(name))
        assert row.split()[1] == "2" and "3 open (attempt" in row and "etl" in row, listed.stdout

        # abort: bad input first (nothing connects), then the stray attempt, then nothing left to abort
        assert "--reason must say why" in _cli("abort", name, "--reason", " ", env=env).stderr
        aborted = _cli("abort", name, "--reason", "its worker was deleted", env=env)
        assert aborted.returncode == 0, aborted.stderr
        assert f"aborted attempt {attempt.token} of epoch 3 (owner etl" in aborted.stdout
        with pytest.raises(AttemptSuperseded):
            ledger.vote(attempt, "orders", "ingest", {"rows": 30})
        again = _cli("abort", name, "--reason", "twice", env=env)
        assert again.returncode == 2 and "is aborted, not running: nothing to abort" in again.stderr, again.stderr
        history = _cli("history", name, env=env).stdout
        assert "attempt_aborted" in history and "its worker was deleted" in history

        # delete: without a terminal and without --yes it refuses before connecting; with --yes it goes
        refused = subprocess.run([CLI, "delete", name], env=env, capture_output=True, text=True, timeout=180,
                                 stdin=subprocess.DEVNULL)
        assert refused.returncode == 2 and "no terminal to confirm on; pass --yes" in refused.stderr
        assert ledger.frontier() == 2
        deleted = _cli("delete", name, "--yes", env=env)
        assert deleted.returncode == 0, deleted.stderr
        assert f"deleted pipeline {name!r}" in deleted.stdout
        with pytest.raises(PipelineNotFound):
            ledger.frontier()
        assert client.exists(f"/airflow-epochs/{name}") is None
        assert name not in _cli("list", env=env).stdout
        missing = _cli("delete", name, "--yes", env=env)
        assert missing.returncode == 2 and f"no pipeline {name!r} under /airflow-epochs" in missing.stderr
    finally:
        client.stop()
        client.close()


def test_delete_asks_for_the_name_and_refuses_a_led_pipeline(zk_server, monkeypatch):
    name = f"cli-{secrets.token_hex(3)}"
    monkeypatch.setenv(*zk_server.state_env)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    client = zk_server.client()
    try:
        ledger = _sealed_pipeline(client, name, epochs=1)
        args = build_parser().parse_args(["delete", name])
        asked: list[str] = []

        def wrong(question: str) -> str:
            asked.append(question)
            return name + "x"

        with pytest.raises(CliError, match="not confirmed"):
            cmd_delete(args, ask=wrong)
        assert "frontier 1" in asked[0] and "Type the pipeline's name" in asked[0]
        assert ledger.frontier() == 1
        lease = EpochLedger(client, name, owner="leader-a").lease()
        lease.acquire()
        with pytest.raises(CliError, match="is led by 'leader-a'"):
            cmd_delete(args, ask=lambda _q: name)
        lease.release()
        assert cmd_delete(args, ask=lambda _q: name) == 0
        with pytest.raises(PipelineNotFound):
            ledger.frontier()
    finally:
        client.stop()
        client.close()


def test_a_stopped_embedded_server_serves_for_one_command(tmp_path):
    """What the demo leaves: its server stopped, its data and credentials in the folder. ``status`` starts
    it for itself and stops it again; nothing is left running."""
    base = private_dir(tmp_path / "epochs-home")
    env = _clean_env(tmp_path, AIRFLOW_EPOCHS_HOME=str(base))
    started = _cli("zookeeper", "start", env=env)
    assert started.returncode == 0, started.stderr
    try:
        from airflow_epochs.connection.embedded import client_settings, running_server

        client = client_settings(base, running_server(base)).start_client(timeout=30)
        try:
            _sealed_pipeline(client, "kept", epochs=2)
        finally:
            client.stop()
            client.close()
    finally:
        assert _cli("zookeeper", "stop", env=env).returncode == 0
    status = _cli("status", "kept", env=env)
    assert status.returncode == 0, status.stderr
    assert "pipeline kept: frontier 2;" in status.stdout
    assert "was stopped: served for this command" in status.stderr
    assert "not running" in _cli("zookeeper", "status", env=env).stdout


def test_the_airflow_connection_zookeeper_default_and_where_it_looked(zk_server, zk_chroot, tmp_path):
    client = zk_server.client(zk_chroot)
    try:
        _sealed_pipeline(client, "sales", epochs=1)
    finally:
        client.stop()
        client.close()
    empty = private_dir(tmp_path / "no-server")
    connection = zk_server.connection_json(zk_chroot)
    env = _clean_env(tmp_path, AIRFLOW_EPOCHS_HOME=str(empty), AIRFLOW_CONN_ZOOKEEPER_DEFAULT=connection)
    found = _cli("status", "sales", env=env)
    assert found.returncode == 0, found.stderr
    assert "pipeline sales: frontier 1;" in found.stdout
    # Nothing anywhere: one line, each place it looked, and what to give.
    home = tmp_path / "new-home"
    home.mkdir()
    nowhere = _cli("status", "sales", env=_clean_env(home))
    assert nowhere.returncode == 2
    assert nowhere.stderr.startswith(f"error: where is ZooKeeper? no embedded ZooKeeper in {home}/.airflow-epochs "
                                     "($AIRFLOW_EPOCHS_HOME is not set); no Airflow set up here"), nowhere.stderr
    assert "Give --conn-id" in nowhere.stderr and len(nowhere.stderr.strip().splitlines()) == 1
    assert not (home / "airflow").exists()  # looking did not make an Airflow home


def test_a_rejected_identity_is_named_with_its_source(zk_server, zk_chroot, tmp_path):
    """Credentials given and refused: the line names the user and the connection, and never asks for
    credentials (they were given). In a process of its own: looking a connection up configures Airflow's
    logging, whose handlers would outlive this test's captured streams."""
    owner = zk_server.settings(zk_chroot, login="etl", password="pw-owner", use_acl=True).start_client()
    try:
        EpochLedger(owner, "guarded", owner="etl").create_pipeline(PipelineConfig({"orders": ("ingest",)}))
    finally:
        owner.stop()
        owner.close()
    stranger = zk_server.connection(zk_chroot, login="stranger", password="pw-stranger")
    env = _clean_env(tmp_path, AIRFLOW_CONN_ZK_STRANGER=json.dumps(stranger))
    refused = _cli("status", "guarded", "--conn-id", "zk_stranger", env=env)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    err = refused.stderr
    assert "ZooKeeper refused digest user 'stranger' (NoAuth) on pipeline 'guarded', connecting with connection " \
           "'zk_stranger'" in err, err
    assert "give them" not in err and "give its" not in err


def test_parser_has_the_cleanup_commands():
    """Unit check: the three commands and their refusals of bad input, before anything connects."""
    parsed = build_parser().parse_args(["abort", "p", "--reason", "r", "--epoch", "4"])
    assert isinstance(parsed, argparse.Namespace) and parsed.epoch == 4
    with pytest.raises(SystemExit):
        build_parser().parse_args(["abort", "p"])  # --reason is required
    with pytest.raises(SystemExit):
        build_parser().parse_args(["abort", "p", "--reason", "r", "--epoch", "0"])
