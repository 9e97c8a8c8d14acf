"""The Epochs page in a real browser, inside a real Airflow deployment.

One deployment for the module (PostgreSQL, API server, scheduler, triggerer, DAG processor), in
multi-team mode with two DAG bundles: ``ui_probe`` (pipeline ``uiprobe``) belongs to team alpha,
``ui_other`` (pipeline ``uiother``) to team beta. Users of the simple auth manager: ``alice`` (viewer,
alpha) and ``bob`` (viewer, beta), with the passwords Airflow generated. Debian's chromium, driven by
Playwright, logs in through Airflow's login page and opens the page from Airflow's navigation.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_stack import REPO, AirflowStack, postgres_bin
from chromium import CHROMIUM, chromium_context
from kazoo.client import KazooClient
from ui_helpers import PROBE, build_probe, expected_grid, resume_probe
from zk_helpers import fresh_chroot_client

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

DOC_SCREENSHOT = REPO / "docs" / "epochs-page.png"
# Set to 1 to refresh the docs' picture of the page (docs/epochs-page.png); otherwise the shot stays in
# the test's tmp dir
# (a run must not change a tracked file).
UPDATE_SCREENSHOT_ENV = "EPOCHS_UPDATE_SCREENSHOT"
TEAMS = ("alpha", "beta")


@pytest.fixture(scope="module")
def ui_zk(zk_server) -> Iterator[tuple[str, KazooClient]]:
    yield from fresh_chroot_client(zk_server, "ui")


@pytest.fixture(scope="module")
def ui_stack(tmp_path_factory, zk_server, ui_zk, airflow_pg_template) -> Iterator[AirflowStack]:
    if postgres_bin() is None:
        pytest.fail("PostgreSQL server binaries not installed: .ci/run installs Debian's postgresql")
    if not CHROMIUM.exists():
        pytest.fail("chromium not installed: .ci/run installs Debian's chromium")
    base = tmp_path_factory.mktemp("ui-stack")
    dags = base / "airflow" / "dags"
    bundles = [{"name": team, "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(dags / team)}, "team_name": team} for team in TEAMS]
    stack = AirflowStack(base, template=airflow_pg_template, env={
        "AIRFLOW_CONN_ZOOKEEPER_DEFAULT": zk_server.connection_json(ui_zk[0]),
        "AIRFLOW__CORE__MULTI_TEAM": "True",
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "alice:viewer:alpha,bob:viewer:beta",
    })
    try:
        stack.start([REPO / "tests" / "dags" / "ui" / team for team in TEAMS],
                    setup=[["teams", "create", team] for team in TEAMS])
        stack.wait_for_dags(["ui_probe", "ui_other"])
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def probe(ui_stack, ui_zk):
    """The ledger of pipeline ``uiprobe``: sealed, aborted and rolled-back epochs (see ui_helpers)."""
    return build_probe(ui_zk[1])


def _url(stack: AirflowStack, path: str = "/") -> str:
    return f"http://127.0.0.1:{stack.api_port}{path}"


def _passwords(stack: AirflowStack) -> dict[str, str]:
    return json.loads((stack.home / "simple_auth_manager_passwords.json.generated").read_text())


@pytest.fixture
def browser() -> Iterator[Any]:
    with chromium_context(width=1400, height=1000) as context:
        yield context


def _log_in(context: Any, stack: AirflowStack, user: str) -> Any:
    page = context.new_page()
    page.goto(_url(stack))
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(_passwords(stack)[user])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(_url(stack), timeout=30000)
    return page


def _open_epochs_from_nav(page: Any) -> Any:
    page.get_by_role("link", name="Epochs").click()
    frame = page.frame_locator("iframe[title=Epochs]")
    frame.locator("[data-testid=pipeline-select] option").first.wait_for(state="attached", timeout=30000)
    return frame


def _grid(frame: Any) -> dict[int, dict[str, str]]:
    cells: dict[int, dict[str, str]] = {}
    rows = frame.locator("[data-testid=grid] tbody tr[data-epoch]")
    for i in range(rows.count()):
        row = rows.nth(i)
        spans = row.locator("span.cell")
        cells[int(row.get_attribute("data-epoch"))] = {
            spans.nth(j).get_attribute("data-partition"): spans.nth(j).inner_text() for j in range(spans.count())}
    return cells


def test_airflow_lists_the_plugin_and_the_api_refuses_anonymous_requests(ui_stack):
    listed = ui_stack.airflow("plugins", "-o", "json")
    assert listed.returncode == 0, listed.stderr[-2000:]
    plugins = json.loads(listed.stdout[listed.stdout.index("["):])
    [epochs] = [p for p in plugins if p["name"] == "epochs"]
    assert epochs["fastapi_apps"][0]["url_prefix"] == "/epochs"
    assert {v["destination"] for v in epochs["external_views"]} == {"nav", "dag", "dag_run", "task_instance"}
    for path in ("/epochs/", "/epochs/api/pipelines", f"/epochs/api/pipelines/{PROBE}/epochs"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(_url(ui_stack, path), timeout=10)
        assert refused.value.code == 401, path


def screenshot_path(tmp_dir: Path, environ: Any = os.environ) -> Path:
    """Where the page's screenshot goes: the doc image only when ``$EPOCHS_UPDATE_SCREENSHOT`` is 1."""
    return DOC_SCREENSHOT if environ.get(UPDATE_SCREENSHOT_ENV) == "1" else tmp_dir / "epochs-page.png"


def test_the_screenshot_refreshes_the_doc_image_only_when_asked(tmp_path):
    assert screenshot_path(tmp_path, {}) == tmp_path / "epochs-page.png"
    assert screenshot_path(tmp_path, {UPDATE_SCREENSHOT_ENV: "0"}) == tmp_path / "epochs-page.png"
    assert screenshot_path(tmp_path, {UPDATE_SCREENSHOT_ENV: "1"}) == DOC_SCREENSHOT


def test_the_grid_shows_the_ledger_and_follows_it_live(ui_stack, ui_zk, probe, browser, tmp_path):
    from playwright.sync_api import expect

    doc_image = DOC_SCREENSHOT.read_bytes() if DOC_SCREENSHOT.exists() else None

    page = _log_in(browser, ui_stack, "alice")
    frame = _open_epochs_from_nav(page)
    expect(frame.locator("[data-testid=pipeline-select]")).to_have_value(PROBE)
    expect(frame.locator("tr[data-epoch='1']")).to_be_visible()
    assert _grid(frame) == expected_grid(probe, range(1, 6))
    assert _grid(frame)[4] == {"left": "1 of 2", "right": "aborted"}
    assert [frame.locator(f"tr[data-epoch='{e}']").get_attribute("data-state") for e in (5, 4, 3)] == [
        "rolled_back", "aborted", "sealed"]
    expect(frame.locator("[data-testid=frontier]")).to_have_text(str(probe.frontier()))
    expect(frame.locator("[data-testid=leader]")).to_have_text("deploy-a")
    # times as the page writes them all: to the second, in UTC (not a raw ISO string, not local time)
    expect(frame.locator("#leader-sub")).to_have_text(re.compile(
        r"lease (until|expired) \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"))
    expect(frame.locator("#updated")).to_have_text(re.compile(r"^updated \d\d:\d\d:\d\d UTC$"))
    counts = frame.locator("[data-testid=counts]")
    for text in ("sealed 3", "aborted 1", "rolled back 1", "total 5"):
        expect(counts).to_contain_text(text)
    barrier = frame.locator("[data-testid=barriers] tr[data-barrier=ingested]")
    expect(barrier.locator("[data-testid=arrived]")).to_have_text("1 of 2")
    expect(barrier.locator("[data-testid=stragglers]")).to_have_text("c")

    # filters: only the sealed epochs
    frame.locator("[data-testid=filter-sealed]").check()
    expect(frame.locator("[data-testid=grid] tbody tr[data-epoch]")).to_have_count(3)
    frame.locator("[data-testid=filter-sealed]").uncheck()
    expect(frame.locator("[data-testid=grid] tbody tr[data-epoch]")).to_have_count(5)

    # a standby takes epoch 4 over and votes: the open page follows without a reload
    resume_probe(ui_zk[1])
    expect(frame.locator("tr[data-epoch='4']")).to_have_attribute("data-state", "voting", timeout=15000)
    assert _grid(frame) == expected_grid(probe, range(1, 6))
    assert _grid(frame)[4] == {"left": "1 of 2", "right": "sealed"}
    expect(frame.locator("[data-testid=in-flight]")).to_have_text("epoch 4")

    # the epoch's detail: votes with their attempts, the aborted attempt's vote shown as superseded
    frame.locator("tr[data-epoch='4']").click()
    detail = frame.locator("[data-testid=detail]")
    expect(detail).to_contain_text("Epoch 4")
    expect(detail.locator("tr[data-producer=a]")).to_contain_text("superseded attempt")
    expect(detail.locator("tr[data-producer=b]")).to_contain_text("voted")
    expect(detail).to_contain_text("driver lost", timeout=15000)
    expect(frame.locator("[data-testid=timeline] svg")).to_be_visible()
    legend = frame.locator("[data-testid=timeline] svg .legend")  # what lanes, bars and colours are
    expect(legend).to_contain_text("One lane per stage")
    expect(legend).to_contain_text("epoch 1")
    shot = screenshot_path(tmp_path)
    shot.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20000
    if shot != DOC_SCREENSHOT:  # not asked to refresh it: the tracked image is as it was
        assert (DOC_SCREENSHOT.read_bytes() if DOC_SCREENSHOT.exists() else None) == doc_image

    # the DAG's own Epochs tab opens the same pipeline
    page.goto(_url(ui_stack, "/dags/ui_probe/plugin/epochs-dag"))
    tab = page.frame_locator("iframe[title=Epochs]")
    expect(tab.locator("[data-testid=pipeline-select]")).to_have_value(PROBE, timeout=30000)
    expect(tab.locator("tr[data-epoch='4']")).to_have_attribute("data-state", "voting")


def test_a_user_without_access_to_the_dag_sees_nothing_of_its_pipeline(ui_stack, probe, browser):
    from playwright.sync_api import expect

    page = _log_in(browser, ui_stack, "bob")
    frame = _open_epochs_from_nav(page)
    select = frame.locator("[data-testid=pipeline-select]")
    expect(select.locator("option")).to_have_count(1)
    expect(select.locator("option")).to_have_text(re.compile("^uiother"))
    expect(frame.locator("[data-testid=message]")).to_contain_text("no state in ZooKeeper yet")
    assert PROBE not in frame.locator("body").inner_text()
    assert frame.locator("[data-testid=grid] tbody tr[data-epoch]").count() == 0
    # asked directly, with bob's session: the same answer as for a pipeline that does not exist
    for path in (f"/epochs/api/pipelines/{PROBE}", f"/epochs/api/pipelines/{PROBE}/epochs",
                 f"/epochs/api/pipelines/{PROBE}/epochs/1", f"/epochs/api/pipelines/{PROBE}/timeline.svg"):
        answer = page.request.get(_url(ui_stack, path))
        assert answer.status == 404, path
        assert "sealed" not in answer.text() and "deploy-a" not in answer.text()
    listed = page.request.get(_url(ui_stack, "/epochs/api/pipelines")).json()
    assert [p["pipeline"] for p in listed["pipelines"]] == ["uiother"]


def test_a_dag_run_page_opens_the_epoch_the_run_worked_on(ui_stack, browser):
    from playwright.sync_api import expect

    assert ui_stack.airflow("dags", "unpause", "ui_other").returncode == 0
    triggered = ui_stack.airflow("dags", "trigger", "ui_other", "-o", "json")
    assert triggered.returncode == 0, triggered.stderr[-2000:]
    deadline = time.monotonic() + 240
    while True:
        runs = ui_stack.runs("ui_other")
        if runs and runs[0]["state"] in ("success", "failed"):
            break
        assert time.monotonic() < deadline, (runs, ui_stack.log_tail("scheduler"))
        time.sleep(2)
    assert runs[0]["state"] == "success", ui_stack.log_tail("scheduler")
    run_id = runs[0]["run_id"]

    page = _log_in(browser, ui_stack, "bob")
    assert page.request.get(_url(ui_stack, f"/epochs/api/runs/ui_other/{run_id}")).json() == {
        "pipeline": "uiother", "epoch": 1}
    page.goto(_url(ui_stack, f"/dags/ui_other/runs/{run_id}/plugin/epochs-run"))
    frame = page.frame_locator("iframe[title=Epochs]")
    expect(frame.locator("[data-testid=detail]")).to_contain_text("Epoch 1", timeout=30000)
    expect(frame.locator("tr[data-epoch='1']")).to_have_attribute("data-state", "sealed")
    # alice (the other team) may not read ui_other: its runs map to nothing for her
    browser.clear_cookies()
    other = _log_in(browser, ui_stack, "alice")
    assert other.request.get(_url(ui_stack, f"/epochs/api/runs/ui_other/{run_id}")).status == 404


DOC_LATE_SCREENSHOT = REPO / "docs" / "epochs-page-late.png"


def test_a_late_partition_is_marked_in_the_epoch_detail(ui_stack, ui_zk, probe, browser, tmp_path):
    """Epoch 4's ``left`` waits for producer ``a`` past a deadline declared 1 s after the epoch opened:
    the detail's predicted-seal column says LATE and names ``a`` (the page raises no alert itself)."""
    from playwright.sync_api import expect

    from airflow_epochs.coordination import DeadlineSpec

    if probe.epoch_info(4).attempt_state == "aborted":  # run alone: the standby's takeover of the grid test
        resume_probe(ui_zk[1])
    probe.deadlines().declare(DeadlineSpec("left", mode="fixed", anchor="opened", delta=1.0))
    page = _log_in(browser, ui_stack, "alice")
    frame = _open_epochs_from_nav(page)
    frame.locator("tr[data-epoch='4']").click()
    cell = frame.locator("[data-testid=detail] tr[data-partition=left] [data-testid=deadline]")
    expect(cell).to_contain_text("LATE, waiting for a", timeout=15000)
    expect(cell).to_contain_text("deadline")
    assert probe.deadlines().alert(4, "left") is None  # reading the page raised nothing
    shot = DOC_LATE_SCREENSHOT if os.environ.get(UPDATE_SCREENSHOT_ENV) == "1" else tmp_path / "late.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20000
