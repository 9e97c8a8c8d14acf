"""What a reader of the documentation sees: the docs built by ``scripts/docs.sh``, opened in Debian's
chromium (headless, driven by Playwright), the home and quickstart pages checked and photographed.

The pictures go to ``.epochs/docs-shots/`` (kept out of git), for someone to look at: a test can say
the page rendered, not that it reads well.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from built_once import built_once
from chromium import CHROMIUM, chromium_context

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / ".epochs" / "docs-shots"
PAGES = {
    "home": ("index.html", "airflow-provider-epochs"),
    "quickstart": ("quickstart/own_airflow.html", "Quickstart: into your own Airflow 3"),
}


def _build(folder: Path) -> Path:
    """``bash scripts/docs.sh`` as CI runs it, then a copy of its output (a later build elsewhere in
    the run cannot change the pages under this test)."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "docs.sh")], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, f"scripts/docs.sh failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    shutil.copytree(ROOT / "docs" / "_build" / "html", folder / "html")
    return folder / "html"


@pytest.fixture(scope="session")
def built_docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(tmp_path_factory, "docs-html", _build)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail("chromium not installed: .ci/run installs Debian's chromium")
    with chromium_context(width=1280, height=900, prefix="epochs-docs-chromium-") as context:
        yield context


@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_reader_sees_the_page_rendered(built_docs, browser, name):
    path, heading = PAGES[name]
    page = browser.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.goto((built_docs / path).as_uri())
    page.wait_for_load_state("load")
    assert heading in page.title()
    assert page.locator("h1").first.inner_text().rstrip("#¶ \n") == heading
    body = page.locator("body").inner_text()
    assert "404" not in body and "Page not found" not in body
    # the theme's stylesheet applied (furo lays the page out in a sidebar and a content column)
    assert page.locator(".sidebar-drawer").count() == 1
    assert page.evaluate("getComputedStyle(document.body).fontFamily") != "\"Times New Roman\""
    # nothing fetched from the network, nothing missing: the pages are read offline
    assert all(url.startswith("file://") or url.startswith("data:") for url in requests), requests
    assert not failed, failed
    if name == "quickstart":
        # every step of docs/examples/quickstart.sh and the DAG, included as code, not as an error
        assert page.locator("div.highlight-bash").count() == 14
        # the first DAG in both styles: classic operators and TaskFlow
        assert page.locator("div.highlight-python").count() == 2
        assert "airflow-epochs zookeeper start --port" in body
        assert "Troubleshooting" in body
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=(name == "quickstart"))
    page.screenshot(path=str(SHOTS / f"{name}-top.png"))
    page.close()


def test_no_page_shows_an_error_box_an_empty_bullet_or_a_cut_code_line(built_docs, browser):
    """Every page as rendered, not as built (a warnings-as-errors build cannot see these): no docutils error
    box (furo renders ``.. contents::`` as one), no table cell whose text is an empty bullet (a cell "-"
    read as a list), no code block whose lines run past its box (hidden unless scrolled)."""
    pages = sorted(p.relative_to(built_docs).as_posix() for p in built_docs.rglob("*.html")
                   if not p.relative_to(built_docs).as_posix().startswith(("_", "genindex", "search", "py-modindex")))
    assert len(pages) > 30, pages
    page = browser.new_page()
    found: dict[str, list[str]] = {}
    for path in pages:
        page.goto((built_docs / path).as_uri())
        page.wait_for_load_state("load")
        problems = page.evaluate("""() => {
            const out = [];
            // furo paints a table of contents (.contents) red with an "ERROR: ..." ::before
            for (const box of document.querySelectorAll('.contents, .system-message, .problematic')) {
                const before = getComputedStyle(box, '::before').content;
                out.push('error box: ' + (before && before !== 'none' ? before : box.innerText).slice(0, 100));
            }
            for (const item of document.querySelectorAll('td li, th li'))
                if (!item.innerText.trim()) out.push('empty bullet in a table cell');
            for (const pre of document.querySelectorAll('pre'))
                if (pre.scrollWidth > pre.clientWidth + 1) out.push('cut code line: ' + pre.innerText.slice(0, 80));
            return out;
        }""")
        if problems:
            found[path] = problems[:5]
    page.close()
    assert not found, found
