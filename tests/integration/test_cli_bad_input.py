"""Bad input catalogue of the ``airflow-epochs`` CLI: each mistake is exit status 2 and one line naming
what is wrong, never a traceback, and nothing is written (ZooKeeper and the output folder unchanged)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from zk_helpers import tree

from airflow_epochs.cli import main
from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.servers.embedded_zookeeper import free_port

pytestmark = pytest.mark.integration
CLI = str(Path(sys.executable).parent / "airflow-epochs")


@pytest.fixture
def hosts(zk_server, zk_chroot, zk, monkeypatch):
    EpochLedger(zk, "sales", owner="t").create_pipeline(PipelineConfig({"orders": ("ingest",)}))
    monkeypatch.setenv("AIRFLOW_EPOCHS_HOME", str(zk_server.base))  # the CLI finds the server's credentials there
    return zk_server.address + zk_chroot


def _fails(capsys, argv, expected):
    """``main(argv)`` returns (or exits with) 2 and prints one line containing ``expected``; any exception
    escaping ``main`` is a traceback a user would see, and fails the test."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (argv, out, err)
    assert len(lines) == 1 and expected in lines[0], (argv, err)
    assert "Traceback" not in err
    return err


def test_catalogue(capsys, hosts, tmp_path, zk, monkeypatch, zk_server, zk_chroot):
    monkeypatch.delenv("AIRFLOW_EPOCHS_ZK_PASSWORD", raising=False)
    before = tree(zk)
    taken = tmp_path / "taken.png"  # a folder where the picture should go (root may write anywhere else)
    taken.mkdir()
    closed = f"127.0.0.1:{free_port()}"
    cases = [
        (["status", "bad/name", "--hosts", hosts], "invalid pipeline name 'bad/name'"),
        (["status", "sales", "--hosts", hosts, "--root", "/zookeeper"], "reserves for itself"),
        (["status", "sales", "--hosts", hosts, "--root", "relative"], "must be an absolute znode path"),
        (["status", "sales", "--hosts", hosts, "--root", "/a/../b"], "segment '..' is not allowed"),
        (["status", "sales", "--hosts", "zk1:99999"], "invalid host entry 'zk1:99999'"),
        (["status", "sales", "--hosts", "zk1,,zk2"], "empty entry"),
        (["status", "sales", "--hosts", closed, "--connect-timeout", "1"], "no ZooKeeper server answered"),
        (["status", "sales", "--hosts", hosts, "--connect-timeout", "0"], "between 0 and 3600 seconds"),
        (["status", "sales", "--hosts", hosts, "--recent", "999999999"], "from 0 to 1000"),
        (["status", "sales", "--hosts", hosts, "--digest-user", "etl"], "needs its password in"),
        (["status", "sales", "--hosts", hosts, "--tls", "--ca", str(tmp_path / "missing.pem")],
         "is not a readable file"),
        (["status", "sales", "--conn-id", "zk", "--hosts", hosts], "cannot be combined with --hosts"),
        (["status", "missing", "--hosts", hosts], "'missing'"),
        (["timeline", "sales", "--hosts", hosts, "--out", str(taken)], "is not writable"),
        (["timeline", "sales", "--hosts", hosts, "--out", str(tmp_path / "no" / "t.png")], "does not exist"),
        (["timeline", "sales", "--hosts", hosts, "--out", str(tmp_path / "t.gif")], "must end in .png or .html"),
        (["timeline", "sales", "--hosts", hosts, "--out", str(tmp_path / "t.png"), "--epochs", "1..99999999999"],
         "outside 1..9999999999"),
        (["timeline", "sales", "--hosts", hosts, "--out", str(tmp_path / "t.png"), "--epochs", "1..9999999"],
         "a timeline draws at most 10000"),
        (["timeline", "sales", "--hosts", hosts, "--out", str(tmp_path / "t.png"), "--epochs", "9..3"],
         "ends before it starts"),
        (["timeline", "sales", "--hosts", hosts, "--out", str(tmp_path / "t.png"), "--epochs", "x"],
         "must look like 3..9"),
        (["acl", "burn", "sales"], "invalid choice: 'burn'"),
        (["zookeeper", "start", "--port", "99999"], "not a TCP port"),
        (["spark-connect", "start", "--master", "local[2]; rm -rf /"], "must be local, local[N]"),
        (["spark-connect", "start", "--master", "yarn"], "must be local, local[N]"),
        (["nonsense"], "invalid choice: 'nonsense'"),
    ]
    for argv, expected in cases:
        _fails(capsys, argv, expected)
    # Our certificate but no digest identity (the server's state folder out of sight): refused before a request.
    monkeypatch.delenv("AIRFLOW_EPOCHS_HOME")
    tls = zk_server.settings()
    _fails(capsys, ["acl", "check", "sales", "--hosts", zk_server.address, "--ca", str(tls.ca), "--certfile",
                    str(tls.certfile), "--keyfile", str(tls.keyfile)],
           "ACLs can be checked and repaired only with credentials")
    assert tree(zk) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.png"]


def test_a_protected_pipeline_without_credentials_is_one_line(capsys, zk_server, zk_chroot, monkeypatch):

    owner = zk_server.settings(zk_chroot, login="etl", password="pw-protected", use_acl=True).start_client()
    try:
        EpochLedger(owner, "private", owner="etl").create_pipeline(PipelineConfig({"orders": ("ingest",)}))
    finally:
        owner.stop()
        owner.close()
    monkeypatch.setenv("AIRFLOW_EPOCHS_ZK_PASSWORD", "pw-stranger")  # our certificate, another identity
    # Credentials were given: the line names who was refused and how it connected, and asks for none.
    err = _fails(capsys, ["history", "private", *zk_server.cli_args(zk_chroot, login="stranger")],
                 f"ZooKeeper refused digest user 'stranger' (NoAuth) on pipeline 'private', connecting with --hosts "
                 f"{zk_server.address}{zk_chroot}")
    assert "give them" not in err and "give its" not in err


def test_the_installed_command_prints_no_traceback(tmp_path):
    """The same, through the installed entry point: what a user's terminal shows."""
    closed = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    for argv, expected in ((["status", "sales", "--hosts", closed, "--connect-timeout", "1"], "no ZooKeeper"),
                           (["zookeeper", "start", "--port", "0"], "not a TCP port")):
        run = subprocess.run([CLI, "--state-dir", str(tmp_path), *argv], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and expected in run.stderr, run
        assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert time.monotonic() - started < 30
