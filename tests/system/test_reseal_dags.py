"""A re-seal through a DAG run (ResealOperator over the hook) and through ``airflow-epochs reseal``:
the version is opened once per request, a second request while it is open fails the task naming the
version in flight, bad requests fail and write nothing, and the producers' votes seal the version."""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import pytest
from zk_helpers import tree

from airflow_epochs.cli import main
from airflow_epochs.coordination import EpochLedger

pytestmark = pytest.mark.integration


def _run(dagbag, dag_id: str, **conf: object) -> str:
    return str(dagbag.get_dag(dag_id).test(run_conf=conf).state)


def _reseal(dagbag, **conf: object) -> str:
    """A run of ``maint_reseal`` with every parameter given (a run's conf is not reset between test runs)."""
    return _run(dagbag, "maint_reseal", **{"epoch": 1, "partition": "out", "reason": "late input", **conf})


def test_reseal_through_a_dag_run(dagbag, airflow_home, zk_connection, zk, capfd):
    ledger = EpochLedger(zk, "maint")
    for epoch in (1, 2):
        assert "success" in _run(dagbag, "maint_producer", epoch=epoch)
    before = tree(zk, ledger.paths.base)
    for conf, words in (({"epoch": 3}, "epoch 3 is not sealed yet"),
                        ({"partition": "nope"}, "partition 'nope' is not configured at epoch 1"),
                        ({"reason": " "}, "needs a reason"),
                        ({"epoch": "x"}, "epoch must be a positive integer")):
        capfd.readouterr()
        assert "failed" in _reseal(dagbag, **conf), conf
        out = capfd.readouterr()
        assert words in out.out + out.err, conf
    assert tree(zk, ledger.paths.base) == before  # the refused runs wrote nothing

    assert "success" in _reseal(dagbag, reason="late rows for day 1")
    (version,) = ledger.corrections.versions(1, "out")
    assert (version.version, version.state, version.reason) == (2, "open", "late rows for day 1")
    capfd.readouterr()
    assert "failed" in _reseal(dagbag)  # another run, another request: one at a time
    out = capfd.readouterr()
    assert "version 2 of 'out' at epoch 1 is being re-sealed" in out.out + out.err
    assert "success" in _run(dagbag, "maint_sealed", epoch=1)
    assert ledger.corrections.vote_version(1, "out", 2, "job", {"rows": 3}).sealed
    assert ledger.corrections.sealed_version(1, "out").version == 2
    assert ledger.frontier() == 2
    # the sensor names the version it found sealed: 1 before the re-seal landed, 2 after
    assert "success" in _run(dagbag, "maint_sealed", epoch=1)
    with sqlite3.connect(airflow_home / "airflow.db") as db:
        found = [json.loads(v)["out"]["version"] for (v,) in db.execute(
            "SELECT value FROM xcom WHERE dag_id = 'maint_sealed' AND task_id = 'sealed' ORDER BY timestamp")]
    assert found == [1, 2]


def test_reseal_from_the_command_line(zk, zk_server, zk_chroot, capsys, monkeypatch):
    ledger = EpochLedger(zk, "cli")
    from airflow_epochs.coordination import PipelineConfig

    ledger.create_pipeline(PipelineConfig({"out": ("job",)}))
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "out", "job", {"rows": 1})
    monkeypatch.setenv(*zk_server.state_env)
    hosts = zk_server.cli_args(zk_chroot)
    before = tree(zk, ledger.paths.base)
    assert main(["reseal", "cli", "1", "bad/name", "--reason", "x", *hosts]) == 2
    assert main(["reseal", "cli", "2", "out", "--reason", "x", *hosts]) == 2
    assert "epoch 2 is not sealed yet" in capsys.readouterr().err
    assert tree(zk, ledger.paths.base) == before
    args = ["reseal", "cli", "1", "out", "--reason", "late", "--request-id", "fix-1", *hosts]
    assert main(args) == 0
    assert "re-sealed as version 2 (open" in capsys.readouterr().out
    assert main(args) == 0  # the same request again: the same answer, nothing applied twice
    assert [v.version for v in ledger.corrections.versions(1, "out")] == [2]
    assert main(["corrections", "cli", *hosts]) == 0
    assert "no corrections" in capsys.readouterr().out
    ledger.corrections.vote_version(1, "out", 2, "job", {"rows": 2})
    assert main(["corrections", "cli", "--resume", *hosts]) == 0
    assert "out at epoch 1 as version 2, done, 0 stale seal(s)" in capsys.readouterr().out


def test_newest_version_sensor_waits_for_an_open_reseal(dagbag, airflow_home, zk_connection, zk):
    """Deferred (the trigger runs inline under ``dag.test``): while version 2 is being re-produced the
    sensor waits; the vote that seals it wakes the trigger, and the task returns version 2."""
    ledger = EpochLedger(zk, "maint")
    assert "success" in _run(dagbag, "maint_producer", epoch=1)
    ledger.corrections.reseal(1, "out", reason="late input")
    sealer = threading.Timer(3.0, lambda: ledger.corrections.vote_version(1, "out", 2, "job", {"rows": 5}))
    sealer.start()
    started = time.monotonic()
    try:
        assert "success" in _run(dagbag, "maint_newest", epoch=1, min_version=1)
    finally:
        sealer.join()
    assert time.monotonic() - started >= 3.0  # it waited for the re-seal
    with sqlite3.connect(airflow_home / "airflow.db") as db:
        found = [json.loads(v) for (v,) in db.execute(
            "SELECT value FROM xcom WHERE dag_id = 'maint_newest' AND task_id = 'newest' ORDER BY timestamp")]
    assert found == [{"version": 2, "generation": 1}]
