"""The Epochs page's reader and JSON API on a real ZooKeeper: the grid says what the ledger says,
filters and pages come from the epoch ranges, a page's reads do not grow with the pipeline, and the
API answers only logged-in users, and only about pipelines of DAGs they may read."""

from __future__ import annotations

import time
from functools import partial

import pytest
from ui_helpers import PROBE, build_probe, expected_grid, resume_probe

from airflow_epochs.coordination import EpochLedger, PipelineConfig
from airflow_epochs.hooks.ledgers import ledger_on
from airflow_epochs.ui.dags import DagPipelines
from airflow_epochs.views.pipeline import StateReader

pytestmark = pytest.mark.integration

LABEL = {"rolled_back": "rolled back"}


def _cells(page: object) -> dict[int, dict[str, str]]:
    out = {}
    for row in page.rows:  # type: ignore[attr-defined]
        out[row.epoch] = {c.partition: (f"{c.votes} of {c.needed}" if c.state == "voting" or
                                        (c.state == "aborted" and c.votes) else LABEL.get(c.state, c.state))
                          for c in row.cells}
    return out


def test_grid_overview_and_detail_say_what_the_ledger_says(zk):
    ledger = build_probe(zk)
    reader = StateReader(partial(ledger_on, zk))
    state = reader.pipeline(PROBE)

    page = state.grid()
    assert [r.epoch for r in page.rows] == [5, 4, 3, 2, 1]
    assert [r.state for r in page.rows] == ["rolled_back", "aborted", "sealed", "sealed", "sealed"]
    assert _cells(page) == expected_grid(ledger, range(1, 6))
    assert _cells(page)[4] == {"left": "1 of 2", "right": "aborted"}

    overview = state.overview()
    assert (overview.frontier, overview.newest_epoch, overview.last_epoch, overview.lag_epochs) == (3, 4, 5, 1)
    assert overview.counts.sealed == 3 and overview.counts.aborted == 1 and overview.counts.rolled_back == 1
    assert overview.counts.total == 5 and overview.counts.voting == 0
    assert overview.leader == "deploy-a" and not overview.leader_expired
    assert overview.in_flight is not None and overview.in_flight.epoch == 4
    [barrier] = overview.barriers
    assert (barrier.name, barrier.arrived, barrier.stragglers, barrier.decision) == ("ingested", ("a",), ("c",), None)

    # filters and pages are ranges: no epoch outside the page is read
    assert [r.epoch for r in state.grid(states=["sealed"]).rows] == [3, 2, 1]
    assert [r.epoch for r in state.grid(states=["aborted", "rolled_back"]).rows] == [5, 4]
    assert state.grid(states=["voting"]).rows == ()
    second = state.grid(offset=1, limit=2)
    assert [r.epoch for r in second.rows] == [4, 3] and second.matching == 5
    assert [r.epoch for r in state.grid(before=2).rows] == [2, 1]
    with pytest.raises(ValueError, match="unknown epoch state"):
        state.grid(states=["done"])

    # a standby takes over: the same reader sees the new attempt's votes, not the aborted one's
    resume_probe(zk)
    page = state.grid()
    assert _cells(page) == expected_grid(ledger, range(1, 6))
    assert _cells(page)[4] == {"left": "1 of 2", "right": "sealed"} and page.rows[1].state == "voting"
    assert state.overview().counts.voting == 1

    assert not state.history.loaded  # the grid and the overview never read the history
    first = state.epoch_detail(4)  # the first detail starts reading it, in the background
    assert first is not None and first.row.state == "voting"
    deadline = time.monotonic() + 10
    while not state.history.loaded and time.monotonic() < deadline:
        time.sleep(0.05)
    detail = state.epoch_detail(4)
    assert detail is not None and detail.row.owner == "deploy-b"
    left = next(p for p in detail.partitions if p.partition == "left")
    votes = {v.producer: (v.voted, v.current) for v in left.producers}
    assert votes == {"a": (True, False), "b": (True, True)}  # a's vote belongs to the aborted attempt
    assert [a.event for a in detail.attempts] == ["opened", "sealed", "opened", "aborted", "started"]
    sealed = state.epoch_detail(2)
    assert sealed is not None and sealed.seconds_to_seal is not None and sealed.seconds_to_seal >= 0
    right = next(p for p in sealed.partitions if p.partition == "right")
    assert right.snapshots == {"c": "/lake/totals/2"} and right.lineage == {"raw": 2}
    assert right.summary == {"rows": 200, "bytes": 4096, "files": 1, "seconds": 1.5}
    assert state.epoch_detail(99) is None
    assert {s.lane for s in state.timeline()} >= {"open", "left", "right", "seal"}
    reader.close()


def test_a_grid_page_costs_the_same_reads_whatever_the_pipeline_length(zk, zk_server):
    def requests(epochs: int) -> int:
        name = f"long{epochs}"
        ledger = EpochLedger(zk, name, owner="w")
        ledger.create_pipeline(PipelineConfig({"out": ("job",)}))
        for epoch in range(1, epochs + 1):
            ledger.vote(ledger.open_epoch(epoch), "out", "job", {"rows": epoch})
        ledger.open_epoch(epochs + 1)
        state = StateReader(partial(ledger_on, zk)).pipeline(name)
        state.grid(limit=20)  # a polling page: the reader's configuration cache is warm
        state.overview()
        before = _packets(zk_server)
        page = state.grid(limit=20)
        overview = state.overview()
        used = _packets(zk_server) - before
        assert [r.epoch for r in page.rows] == list(range(epochs + 1, epochs - 19, -1))
        assert overview.counts.sealed == epochs and page.matching == epochs + 1
        return used

    short, long = requests(40), requests(400)
    # the same reads (give or take a session ping); about two per epoch shown
    assert abs(long - short) <= 2 and long < 80, (short, long)


def _packets(zk_server) -> int:
    for line in zk_server.four_letter_word("mntr").splitlines():
        if line.startswith("zk_packets_received"):
            return int(line.split()[-1])
    raise AssertionError("no zk_packets_received in mntr")






class _Index:
    def __init__(self, mapping: dict[str, set[str]]) -> None:
        self.mapping = mapping

    def of(self, dag_ids):
        return {d: DagPipelines(d, frozenset(self.mapping[d]), frozenset({"epoch.open"}))
                for d in dag_ids if d in self.mapping}

    def epoch_of_run(self, dag_id, run_id):
        return None


def test_api_needs_a_login_and_shows_only_pipelines_of_readable_dags(zk):
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_epochs.ui.app import create_app

    build_probe(zk)
    readable = {"alice": {"ui_probe"}, "bob": {"ui_other"}}
    app = create_app(ledgers=partial(ledger_on, zk), authorized_dag_ids=lambda user: readable[user],
                     dag_index=_Index({"ui_probe": {PROBE}, "ui_other": {"uiother"}}))  # type: ignore[arg-type]
    with TestClient(app) as client:
        for path in ("/", "/api/pipelines", f"/api/pipelines/{PROBE}", f"/api/pipelines/{PROBE}/epochs"):
            assert client.get(path).status_code == 401, path
        app.dependency_overrides[get_user] = lambda: "alice"
        assert client.get("/api/pipelines").json() == {
            "pipelines": [{"pipeline": PROBE, "dags": ["ui_probe"], "exists": True}]}
        grid = client.get(f"/api/pipelines/{PROBE}/epochs", params={"limit": 2, "state": "sealed,aborted"}).json()
        assert [r["epoch"] for r in grid["rows"]] == [4, 3] and grid["matching"] == 4
        assert client.get(f"/api/pipelines/{PROBE}/epochs", params={"state": "nope"}).status_code == 400
        assert client.get(f"/api/pipelines/{PROBE}").json()["counts"]["sealed"] == 3
        assert client.get(f"/api/pipelines/{PROBE}/epochs/2").json()["row"]["state"] == "sealed"
        assert client.get(f"/api/pipelines/{PROBE}/timeline.svg").headers["content-type"].startswith("image/svg")
        assert "Epochs" in client.get("/").text
        app.dependency_overrides[get_user] = lambda: "bob"
        assert client.get("/api/pipelines").json() == {
            "pipelines": [{"pipeline": "uiother", "dags": ["ui_other"], "exists": False}]}
        for path in (f"/api/pipelines/{PROBE}", f"/api/pipelines/{PROBE}/epochs", f"/api/pipelines/{PROBE}/epochs/2",
                     f"/api/pipelines/{PROBE}/timeline.svg"):
            answer = client.get(path)
            assert answer.status_code == 404 and PROBE in answer.json()["detail"], path
            assert "sealed" not in answer.text


def test_status_and_the_page_show_compacted_epochs_as_sealed(zk):
    """A compacted epoch keeps no configuration version of its own (``config_version`` -1): its row is
    drawn with the configuration in force at that epoch, as the demo's resumed run prints it."""
    from airflow_epochs.views.status import epoch_status, pipeline_status, render

    ledger = EpochLedger(zk, "compacted", owner="o")
    ledger.create_pipeline(PipelineConfig({"events": ("ingest",), "totals": ("sum",)}, retain_epochs=1))
    for epoch in range(1, 5):
        attempt = ledger.open_epoch(epoch)
        ledger.vote(attempt, "events", "ingest", {"rows": epoch})
        ledger.vote(attempt, "totals", "sum", {"rows": epoch})
    report = ledger.compact()
    assert 1 in report.compacted and ledger.epoch_info(1).attempt_state == "compacted"
    detail = epoch_status(ledger, 1)
    assert detail is not None and detail.row.state == "sealed"
    assert [cell.state for cell in detail.row.cells] == ["sealed", "sealed"]
    assert "frontier 4" in render(pipeline_status(ledger, recent=4))
    page = StateReader(partial(ledger_on, zk)).pipeline("compacted").grid()
    assert [(row.epoch, row.state) for row in page.rows] == [(4, "sealed"), (3, "sealed"), (2, "sealed"), (1, "sealed")]
    assert all(len(row.cells) == 2 for row in page.rows)


def test_the_first_timeline_view_draws_the_recorded_stages_never_an_empty_picture(zk):
    """The page's first timeline request comes before anything read the pipeline's history: it waits
    (bounded) for that first read and draws the stages, instead of answering "no recorded stages yet"
    for a pipeline that has them; while a long history is still loading it says so, with a header the
    page polls on."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_epochs.ui.app import create_app

    build_probe(zk)
    app = create_app(ledgers=partial(ledger_on, zk), authorized_dag_ids=lambda user: {"ui_probe"},
                     dag_index=_Index({"ui_probe": {PROBE}}))  # type: ignore[arg-type]
    app.dependency_overrides[get_user] = lambda: "alice"
    with TestClient(app) as client:
        first = client.get(f"/api/pipelines/{PROBE}/timeline.svg")
        assert first.status_code == 200 and "no recorded stages yet" not in first.text
        assert first.headers["X-Epochs-History"] == "loaded" and "<rect" in first.text
    fresh = StateReader(partial(ledger_on, zk)).pipeline(PROBE)
    found = fresh.timeline(wait=0)  # not waited for: loading (None), never an empty list
    assert found is None or {s.lane for s in found} >= {"open", "seal"}
    assert fresh.history.wait_loaded(30) and {s.lane for s in fresh.timeline()} >= {"open", "seal"}  # type: ignore[union-attr]


def test_a_barrier_with_more_stragglers_than_named_says_how_many_more(zk):
    """A decision names the first 100 stragglers and counts them all: the page's barrier view and
    ``status`` say how many more were late, never only the named ones."""
    from airflow_epochs.coordination import StragglerPolicy
    from airflow_epochs.views.status import pipeline_status, render

    names = [f"p{i:03d}" for i in range(150)]
    ledger = EpochLedger(zk, "widebar", owner="w")
    ledger.create_pipeline(PipelineConfig({"out": ("job",)}, barriers={"wide": tuple(names)}))
    ledger.open_epoch(1)
    now = [time.time()]
    barrier = EpochLedger(zk, "widebar", clock=lambda: now[0]).barrier(1, "wide")
    barrier.declare(StragglerPolicy.rerun(60))
    barrier.arrive(names[0])
    now[0] += 61
    assert barrier.apply_policy() is not None
    (view,) = StateReader(partial(ledger_on, zk)).pipeline("widebar").barriers(1)
    assert (view.decision, len(view.stragglers), view.late, view.unnamed) == ("rerun", 100, 149, 49)
    assert "and 49 more" in render(pipeline_status(ledger, recent=1))


def test_the_detail_and_the_timeline_name_a_resealed_version_and_the_correction_of_a_stale_seal(zk):
    from airflow_epochs.coordination.recipes.corrections.records import read_key

    ledger = EpochLedger(zk, "rs", owner="o")
    ledger.create_pipeline(PipelineConfig({"a": ("x",), "b": ("y",)}))
    for epoch in (1, 2):
        attempt = ledger.open_epoch(epoch)
        ledger.vote(attempt, "a", "x", {"rows": epoch})
        ledger.vote(attempt, "b", "y", {"rows": epoch}, upstream={read_key("rs", "a"): epoch})
    opened = ledger.corrections.reseal(1, "a", reason="late input")
    ledger.corrections.vote_version(1, "a", opened.version, "x", {"rows": 10})  # b at 1 read it: now stale
    state = StateReader(partial(ledger_on, zk)).pipeline("rs")
    detail = state.epoch_detail(1)
    assert detail is not None
    a, b = (next(p for p in detail.partitions if p.partition == name) for name in ("a", "b"))
    assert (a.version, a.correction, a.stale_by, a.summary["rows"]) == (2, opened.correction, "", 10)
    assert a.resealed_at is not None and a.producers[0].summary == {"rows": 10}
    assert (b.version, b.correction, b.stale_by, b.resealed_at) == (1, "", opened.correction, None)
    ledger.corrections.vote_version(1, "b", 2, "y", {"rows": 20}, upstream={read_key("rs", "a"): 1})
    again = state.epoch_detail(1)
    assert again is not None
    b = next(p for p in again.partitions if p.partition == "b")
    assert (b.version, b.correction, b.stale_by, b.summary["rows"]) == (2, opened.correction, "", 20)
    untouched = state.epoch_detail(2)
    assert untouched is not None and {p.version for p in untouched.partitions} == {1}
    fresh = StateReader(partial(ledger_on, zk)).pipeline("rs")  # the page's history cache reads at most so often
    lanes = {s.lane: s.note for s in fresh.timeline() or []}
    assert lanes["a v2"] == f"version 2 sealed; correction {opened.correction}"
    assert lanes["b v2"] == f"version 2 sealed; correction {opened.correction}"
