"""Bounded work on hostile data, on a real ZooKeeper: records forged by whoever could write them (deep
JSON, an attempt token of 10**9, a newest epoch of 9,999,999,999, a negative frontier), a pipeline the
page's connection cannot read, corrupt CLI state files, a malformed token and a planted output link.
Each is answered in one line, or shown for what it is, after a bounded number of reads."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
from intruder import second_user, shared_folder
from ui_helpers import PROBE, build_probe

from airflow_epochs.cli import main
from airflow_epochs.coordination import CorruptPayload, EpochLedger, PipelineConfig
from airflow_epochs.hooks.ledgers import ledger_on
from airflow_epochs.views.pipeline import MAX_OLDER_ATTEMPTS, StateReader

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "airflow-epochs")
DEEP = "[" * 50_000 + "]" * 50_000


def _forge(zk, path: str, **changes) -> None:
    document = json.loads(zk.get(path)[0])
    document.update(changes)
    zk.set(path, json.dumps(document).encode())


def _one_line(capsys, argv: list[str], needle: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and needle in err, err
    return err




def test_forged_records_get_one_line_or_bounded_answers(zk, zk_server, zk_chroot, capsys, monkeypatch):
    ledger = build_probe(zk)
    monkeypatch.setenv(*zk_server.state_env)
    hosts = zk_server.cli_args(zk_chroot)
    # newest_epoch 9,999,999,999: status shows the first epochs after the frontier and says how many more.
    _forge(zk, ledger.paths.base, newest_epoch=9_999_999_999)
    assert main(["status", PROBE, *hosts]) == 0
    out = capsys.readouterr().out
    assert "more epoch(s) up to the newest opened, 9999999999" in out
    state = StateReader(partial(ledger_on, zk)).pipeline(PROBE)
    overview = state.overview()
    assert overview.newest_epoch == 9_999_999_999
    assert state.grid(limit=5).rows and state.timeline() is not None

    # A negative frontier is corrupt, not a state.
    _forge(zk, ledger.paths.frontier, epoch=-5)
    _one_line(capsys, ["status", PROBE, *hosts], "outside 0..9999999999")
    with pytest.raises(CorruptPayload, match="frontier payload field 'epoch' is -5"):
        ledger.frontier()


@pytest.mark.parametrize("until", ["1e300", "NaN", "Infinity", "-1", "1" + "0" * 5000])
def test_a_forged_lease_number_is_a_corrupt_record_in_status_and_on_the_page(zk, zk_server, zk_chroot, capsys,
                                                                           until, monkeypatch):
    """Issue 35: a lease "until" of 1e300 or NaN gave a traceback in ``status`` and a 500 on the Epochs page.
    A number no record holds is refused as a record: one line in the CLI, a 422 naming it on the page."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_epochs.ui.app import create_app
    from airflow_epochs.ui.dags import DagPipelines

    ledger = build_probe(zk)  # led by its deployment: a lease to forge
    raw = zk.get(ledger.paths.leader)[0].decode()
    forged = raw.replace(f'"until":{json.loads(raw)["until"]}', f'"until":{until}')
    assert forged != raw
    zk.set(ledger.paths.leader, forged.encode())
    monkeypatch.setenv(*zk_server.state_env)
    _one_line(capsys, ["status", PROBE, *zk_server.cli_args(zk_chroot)], "/leader: ")

    class Index:
        def of(self, dag_ids):
            return {"d": DagPipelines("d", frozenset({PROBE}), frozenset({"epoch.open"}))}

        def epoch_of_run(self, dag_id, run_id):
            return None

    app = create_app(ledgers=partial(ledger_on, zk), authorized_dag_ids=lambda user: {"d"},
                     dag_index=Index())  # type: ignore[arg-type]
    with TestClient(app, raise_server_exceptions=False) as client:
        app.dependency_overrides[get_user] = lambda: "alice"
        answer = client.get(f"/api/pipelines/{PROBE}")  # the page's overview shows the lease
        assert answer.status_code == 422 and "/leader: " in answer.json()["detail"], answer.text
        assert client.get(f"/api/pipelines/{PROBE}/epochs").status_code == 200  # the grid does not need it


def test_a_forged_attempt_token_does_not_drive_a_loop(zk):
    ledger = EpochLedger(zk, "forged", owner="w")
    ledger.create_pipeline(PipelineConfig({"p": ("a", "b")}))
    attempt = ledger.open_epoch(1)
    ledger.vote(attempt, "p", "a", {"rows": 1})
    _forge(zk, ledger.paths.epoch(1), attempt=10**9)
    state = StateReader(partial(ledger_on, zk)).pipeline("forged")
    reads = []
    real = state.ledger.vote_of

    def counting(*args, **kwargs):
        reads.append(args)
        return real(*args, **kwargs)

    state.ledger.vote_of = counting  # type: ignore[method-assign]  # counts the real reads
    detail = state.epoch_detail(1)
    assert detail is not None and detail.row.attempt == 10**9
    assert len(reads) <= 2 * (2 + MAX_OLDER_ATTEMPTS)  # the row's current votes, then the superseded ones


def test_the_page_lists_readable_pipelines_and_names_the_unreadable_one(zk, zk_server, zk_chroot):
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_epochs.ui.app import create_app
    from airflow_epochs.ui.dags import DagPipelines

    build_probe(zk)
    owner = zk_server.settings(zk_chroot, login="etl", password="pw-protected", use_acl=True).start_client()
    try:
        EpochLedger(owner, "private", owner="etl").create_pipeline(PipelineConfig({"orders": ("ingest",)}))
    finally:
        owner.stop()
        owner.close()
    # A vote nested past the limit in the readable pipeline.
    ledger = EpochLedger(zk, PROBE)
    attempt_path = ledger.paths.vote(4, ledger.epoch_info(4).attempt, "left", "a")  # type: ignore[union-attr]
    zk.set(attempt_path, DEEP.encode())

    class Index:
        def of(self, dag_ids):
            return {"d": DagPipelines("d", frozenset({PROBE, "private"}), frozenset({"epoch.open"}))}

        def epoch_of_run(self, dag_id, run_id):
            return None

    # The page's connection: an identity of its own (ours is the server's superuser, which reads everything).
    viewer = zk_server.client(zk_chroot, login="viewer", password="pw-viewer")
    app = create_app(ledgers=partial(ledger_on, viewer), authorized_dag_ids=lambda user: {"d"},
                     dag_index=Index())  # type: ignore[arg-type]
    with TestClient(app) as client:
        app.dependency_overrides[get_user] = lambda: "alice"
        listed = client.get("/api/pipelines")
        assert listed.status_code == 200
        assert listed.json()["pipelines"] == [
            {"pipeline": "private", "dags": ["d"], "exists": None,
             "error": "NoAuth: this page's ZooKeeper connection may not read it"},
            {"pipeline": PROBE, "dags": ["d"], "exists": True}]
        denied = client.get("/api/pipelines/private")
        assert denied.status_code == 403 and "NoAuth" in denied.json()["detail"]
        deep = client.get(f"/api/pipelines/{PROBE}/epochs/4")
        assert deep.status_code == 422 and "nested deeper than" in deep.json()["detail"], deep.text
        assert client.get(f"/api/pipelines/{PROBE}/epochs/2").status_code == 200






def test_timeline_out_never_follows_a_link_planted_in_a_shared_folder(tmp_path, zk, zk_server, zk_chroot):
    build_probe(zk)
    victim = tmp_path / "victim.html"
    victim.write_text("precious\n")
    with second_user() as intruder, shared_folder() as shared:
        out = shared / "timeline.html"
        intruder.run(["ln", "-s", str(victim), str(out)])
        run = subprocess.run([CLI, "timeline", PROBE, *zk_server.cli_args(zk_chroot), "--out", str(out)],
                             capture_output=True, text=True, timeout=120, env=zk_server.env())
        assert len(run.stderr.strip().splitlines()) <= 1 and "Traceback" not in run.stderr, run
        assert victim.read_text() == "precious\n"
        if run.returncode == 0:  # root may replace the link in a sticky folder; it never writes through it
            assert not out.is_symlink() and "<svg" in out.read_text()
        else:
            assert run.returncode == 2 and out.is_symlink(), run
