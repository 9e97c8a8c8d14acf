"""The documentation's rule: every piece of code a page shows is included from a file that a test runs.

A page may not type code into itself: no ``code-block``/``code``/``sourcecode`` directive, no ``::``
literal block, no ``>>>`` doctest, no ``raw`` HTML. Directives come from an allow-list (a new one is a
decision, made here), and ``literalinclude`` takes only files under the folders whose files the tests
run (the example DAGs, ``docs/examples/`` run by ``tests/integration/test_docs_examples.py``, the tests and
their helpers, the scripts CI runs, ``README.md``); every file under ``docs/examples/`` must be named by
that test. The one exception: ``code-block:: console`` in a page listed with the test that extracts and
runs its commands (and names the page). The README, which is not in the docs, keeps a copy of a marked
``dags/`` section, compared here line for line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

# Directives a page may use: none of them holds code typed into the page.
ALLOWED_DIRECTIVES = {
    "toctree", "literalinclude", "image", "figure", "list-table", "table", "note", "warning", "tip",
    "important", "seealso", "admonition", "rubric", "automodule", "autoclass", "autofunction",
    "autodata", "autoexception", "argparse", "grid", "grid-item", "grid-item-card", "card", "tab-set",
    "tab-item", "dropdown", "only", "glossary",
}
# The one exception: ``code-block:: console`` in a page whose console blocks a test extracts and runs, as
# the quickstart into your own Airflow is followed literally by its system test. page -> that test.
EXTRACTED_CONSOLE = {"quickstart/own_airflow.rst": "tests/system/test_docs_quickstart.py"}
# Folders (and files) whose files a test runs or checks: the only places literalinclude reads from.
INCLUDE_ROOTS = ("dags/", "docs/examples/", "tests/", "scripts/", "bench/", "README.md", ".ci/run")
DIRECTIVE = re.compile(r"^\s*\.\.\s+([A-Za-z][\w:-]*)::(.*)$")


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.rst") if "_build" not in p.parts)


def console_extracted(page: Path) -> bool:
    """Whether a test extracts and runs the console blocks of ``page``: it is listed, and its test names it."""
    test = EXTRACTED_CONSOLE.get(page.relative_to(DOCS).as_posix()) if page.is_relative_to(DOCS) else None
    return test is not None and (ROOT / test).is_file() and page.name in (ROOT / test).read_text()


def offences(text: str, page: Path) -> list[str]:
    """Every code block in ``text`` not included from a file, as 'page:line: what'."""
    found: list[str] = []
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        where = f"{page.relative_to(ROOT)}:{number}"
        directive = DIRECTIVE.match(line)
        if directive:
            name = directive.group(1)
            if name in {"code-block", "code"} and directive.group(2).strip() == "console" and console_extracted(page):
                continue
            if name not in ALLOWED_DIRECTIVES:
                found.append(f"{where}: directive {name!r} is not in the allow-list")
            if name == "literalinclude":
                target = (page.parent / directive.group(2).strip()).resolve()
                relative = target.relative_to(ROOT).as_posix() if target.is_relative_to(ROOT) else str(target)
                if not relative.startswith(INCLUDE_ROOTS):
                    found.append(f"{where}: literalinclude of {relative}, outside the tested folders")
                if not target.is_file():
                    found.append(f"{where}: {relative} does not exist")
            continue
        if line.rstrip().endswith("::") and not line.lstrip().startswith(".."):
            found.append(f"{where}: a '::' literal block (code typed into the page)")
        if line.lstrip().startswith(">>>"):
            found.append(f"{where}: a '>>>' doctest block (code typed into the page)")
    return found


def test_there_are_pages():
    assert (DOCS / "index.rst").is_file() and len(pages()) > 20


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(DOCS).as_posix())
def test_every_code_block_is_included_from_a_file(page):
    assert offences(page.read_text(), page) == []


def test_the_rule_catches_typed_code(tmp_path):
    page = DOCS / "probe.rst"  # only its name is used, for the messages
    typed = [
        ".. code-block:: python\n\n   print(1)\n",
        ".. code:: bash\n\n   ls\n",
        ".. sourcecode:: python\n\n   x = 1\n",
        ".. raw:: html\n\n   <b>x</b>\n",
        ".. parsed-literal::\n\n   x\n",
        "Run this::\n\n   airflow-epochs status\n",
        "::\n\n   airflow-epochs status\n",
        "Run this ::\n\n   airflow-epochs status\n",
        ">>> 1 + 1\n2\n",
        ".. literalinclude:: ../provider/cli/parser.py\n",
    ]
    for text in typed:
        assert offences(text, page), text
    allowed = ".. literalinclude:: ../dags/example_epoch_smoke.py\n   :language: python\n\nA colon: x.\n"
    assert offences(allowed, page) == []
    # Console blocks only where a test extracts them: not in an unlisted page.
    assert offences(".. code-block:: console\n\n   $ airflow-epochs status p\n", page)
    # A listed page whose test does not exist (or does not name it) gets no exception either.
    assert console_extracted(DOCS / "quickstart" / "own_airflow.rst") == (
        (ROOT / EXTRACTED_CONSOLE["quickstart/own_airflow.rst"]).is_file()
        and "own_airflow.rst" in (ROOT / EXTRACTED_CONSOLE["quickstart/own_airflow.rst"]).read_text())


# The tests that run the files of docs/examples/ (the quickstart's steps and DAG are run by its system test).
EXAMPLE_RUNNERS = ("tests/integration/test_docs_examples.py", "tests/system/test_docs_quickstart.py")


def test_every_docs_example_is_run_by_a_test():
    runners = "".join((ROOT / runner).read_text() for runner in EXAMPLE_RUNNERS)
    examples = sorted(p for p in (DOCS / "examples").iterdir() if p.is_file())
    assert examples
    for example in examples:
        assert example.name in runners, f"docs/examples/{example.name} is not run by {' or '.join(EXAMPLE_RUNNERS)}"


def marked_section(path: Path, name: str) -> str:
    text = path.read_text()
    start, end = f"# [START {name}]\n", f"# [END {name}]"
    assert start in text and end in text, f"{path.name} lost its {name} markers"
    return text.split(start, 1)[1].split(end, 1)[0]


def test_readme_example_dag_is_the_marked_section_of_its_dag_file():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1, "the README shows one example DAG"
    assert blocks[0] == marked_section(ROOT / "dags" / "example_epoch_smoke.py", "example_epoch_smoke")


def test_readme_is_a_front_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    ci = (ROOT / ".ci" / "run").read_text()
    commands = re.findall(r"```bash\n(.*?)```", text, re.S)[0].splitlines()
    # The README's commands are the ones CI runs (CI adds arguments to the demo's).
    assert [c.split("#")[0].split()[:2] for c in commands] == [["bash", "scripts/demo.sh"], ["bash", "scripts/test.sh"]]
    for command in commands:
        assert " ".join(command.split("#")[0].split()[:2]) in ci
    for page in ("index", "quickstart/demo", "quickstart/own_airflow", "concepts", "security", "reference/api"):
        assert (DOCS / f"{page}.rst").is_file()


def test_the_configuration_page_lists_exactly_what_the_code_reads():
    code = "\n".join(p.read_text() for folder in ("provider", "operators", "sensors")
                     for p in (ROOT / folder).rglob("*.py"))
    page = (DOCS / "reference" / "configuration.rst").read_text()
    read_options = set(re.findall(r'_(?:setting|listed|deployment_setting|allowed)\("([a-z_]+)"', code))
    listed_options = set(re.findall(r"^   \* - ``([a-z_]+)``$", page.split("Environment variables")[0], re.M))
    assert read_options and read_options == listed_options
    read_vars = set(re.findall(r'"(AIRFLOW_EPOCHS_[A-Z_]+)"', code))
    listed_vars = set(re.findall(r"^   \* - ``(AIRFLOW_EPOCHS_[A-Z_]+)``$", page, re.M))
    assert read_vars and read_vars == listed_vars
