"""Who may import whom among the package's wings: an allow-list, checked against every import of every
module (function-level and ``TYPE_CHECKING`` imports included).

The rule it holds: production code (hooks, operators, sensors, triggers, listeners, tables, views,
lineage, the UI, Spark, the connection wing, the core) never imports the command line or the
development servers; what both sides need (connection settings, the embedded server's state and
credentials, private files, process identity) lives below both of them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "airflow_epochs"
# Source folder -> the dotted package it installs as (pyproject.toml's package-dir).
SOURCES = {"provider": PACKAGE, "operators": f"{PACKAGE}.operators", "sensors": f"{PACKAGE}.sensors"}

DEVELOPMENT = frozenset({"cli", "servers"})
_LEAVES = frozenset({"path_trust", "redaction", "process_identity"})
_BELOW = _LEAVES | {"private_files", "retries", "coordination", "connection"}
# Each wing (a subpackage, or a module at the package's top) -> the wings it may import. Widen an entry
# only with a reason; never give a production wing a development one.
ALLOWED: dict[str, frozenset[str]] = {
    "__init__": frozenset(),
    "path_trust": frozenset(),
    "redaction": frozenset(),
    "process_identity": frozenset(),
    "private_files": frozenset({"path_trust"}),
    # a NoAuth refusal names the identity the task connected as, which the connection wing resolves
    "retries": frozenset({"coordination", "connection"}),
    # the core stands alone (and imports no Airflow); path_trust, a leaf, checks a local archive's path
    "coordination": frozenset({"path_trust"}),
    "connection": frozenset({"coordination", "private_files", "process_identity", "redaction"}),
    "spark": frozenset({"coordination", "path_trust", "redaction"}),
    "hooks": _BELOW | {"spark"},
    "triggers": _BELOW | {"hooks"},
    "listeners": _BELOW | {"hooks"},
    "lineage": _BELOW | {"hooks", "tables", "spark"},
    "views": _BELOW,  # no hooks: the CLI draws views too; a view's caller hands it ledgers (a factory)
    "tables": _BELOW | {"hooks", "spark", "views"},
    "operators": _BELOW | {"hooks", "lineage", "spark", "tables", "triggers"},
    "sensors": _BELOW | {"hooks", "operators", "triggers"},
    "analysis": _BELOW | {"operators", "sensors"},
    "ui": _BELOW | {"hooks", "listeners", "tables", "triggers", "views"},
    "servers": _BELOW | {"spark"},
    "worker_logs": frozenset(),  # a worker's log server: Airflow's own application, nothing of ours
    "cli": _BELOW | {"analysis", "hooks", "servers", "spark", "tables", "views"},
}


def wing_of(dotted: str) -> str | None:
    """The wing of a dotted module name of the package (``airflow_epochs.hooks.zookeeper`` -> ``hooks``,
    ``airflow_epochs`` -> ``__init__``); None for anything outside the package."""
    parts = dotted.split(".")
    if parts[0] != PACKAGE:
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(source: str) -> list[tuple[str, int]]:
    """(dotted name, line) of every absolute import in ``source``; ``from a import b`` gives ``a.b``
    too (``from airflow_epochs import cli`` imports the wing ``cli``)."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, node.lineno))
            found.extend((f"{node.module}.{alias.name}", node.lineno) for alias in node.names
                         if node.module == PACKAGE)
        elif isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
    return found


def forbidden_imports(own: str, source: str) -> list[tuple[int, str]]:
    """(line, what) of each import in a module of wing ``own`` that its allow-list does not name."""
    if own not in ALLOWED:
        raise ValueError(f"wing {own!r} has no allow-list: add it to ALLOWED")
    bad = []
    for name, line in imports_of(source):
        theirs = wing_of(name)
        if theirs is None or theirs in (own, "__init__"):
            continue
        if theirs not in ALLOWED[own]:
            bad.append((line, f"{own} imports {theirs} ({name})"))
    return bad


def _modules() -> list[tuple[str, str, str]]:
    """(path, wing, source) of every module of the package."""
    found = []
    for folder, dotted in SOURCES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            own = wing_of(".".join((dotted, *parts)).removesuffix(".__init__"))
            assert own is not None
            found.append((str(path.relative_to(ROOT)), own, path.read_text()))
    return found


# Modules kept for imports of earlier releases: each imports only the one module its names moved to,
# and warns (the changelog lists them); they draw no arrow of the package's shape.
DEPRECATED_ALIASES = {"provider/hooks/iceberg.py": "airflow_epochs.tables.hook"}


def test_every_import_between_wings_is_allowed():
    bad = [f"{path}:{line}: {what}" for path, own, source in _modules() if path not in DEPRECATED_ALIASES
           for line, what in forbidden_imports(own, source)]
    assert not bad, "not on the allow-list (tests/unit/test_wings.py): " + "; ".join(bad)


def test_a_deprecated_alias_imports_only_where_its_names_went():
    sources = {path: source for path, _own, source in _modules()}
    for path, target in DEPRECATED_ALIASES.items():
        ours = {name for name, _line in imports_of(sources[path]) if name.startswith(PACKAGE)}
        assert ours == {target}, (path, ours)
        assert "DeprecationWarning" in sources[path]


def test_no_two_wings_import_each_other():
    """The package's shape has no circles between rooms: no two wings' allow-lists name each other."""
    circles = sorted({tuple(sorted((a, b))) for a, allowed in ALLOWED.items() for b in allowed
                      if a in ALLOWED.get(b, frozenset())})
    assert not circles, f"wings that may import each other: {circles}"


def test_no_production_wing_may_import_the_command_line_or_a_development_server():
    leaks = {wing: sorted(allowed & DEVELOPMENT) for wing, allowed in ALLOWED.items()
             if wing not in DEVELOPMENT and allowed & DEVELOPMENT}
    assert not leaks, f"production code must not depend on the CLI or the development servers: {leaks}"
    assert "cli" not in ALLOWED["servers"]


def test_every_wing_has_an_allow_list():
    wings = {own for _path, own, _source in _modules()}
    assert wings <= set(ALLOWED), f"no allow-list for {sorted(wings - set(ALLOWED))}"
    assert not set(ALLOWED) - wings, f"stale entries: {sorted(set(ALLOWED) - wings)}"


@pytest.mark.parametrize(("own", "source", "expected"), [
    ("hooks", "from airflow_epochs.cli.zookeeper import with_embedded_credentials\n",
     [(1, "hooks imports cli (airflow_epochs.cli.zookeeper)")]),
    ("triggers", "async def f():\n    from airflow_epochs.servers.embedded_zookeeper import four_letter_word\n",
     [(2, "triggers imports servers (airflow_epochs.servers.embedded_zookeeper)")]),
    ("tables", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import airflow_epochs.cli\n",
     [(3, "tables imports cli (airflow_epochs.cli)")]),
    ("views", "from airflow_epochs import servers\n", [(1, "views imports servers (airflow_epochs.servers)")]),
    ("coordination", "from airflow_epochs.hooks.zookeeper import ZooKeeperHook\n",
     [(1, "coordination imports hooks (airflow_epochs.hooks.zookeeper)")]),
    ("hooks", "from airflow_epochs.connection.embedded import with_embedded_credentials\n"
              "from airflow_epochs.hooks.zookeeper import settings_of\nimport airflow_epochs\nimport kazoo\n", []),
    ("cli", "from airflow_epochs.servers.secured_zookeeper import secured_server\n", []),
])
def test_the_wing_check_finds_what_it_must(own, source, expected):
    assert forbidden_imports(own, source) == expected


def test_the_wing_check_refuses_a_wing_without_an_allow_list():
    with pytest.raises(ValueError, match="no allow-list"):
        forbidden_imports("gadgets", "import os\n")


# -- ledgers: every Airflow-side ledger comes from the hook's factory -----------------------------------

LEDGER_CLASS = "EpochLedger"
# Where an EpochLedger may be built: the core (its services), the job side (a PySpark driver holds a
# started client, no Airflow connection), and the hook's factory, ledger_on.
LEDGER_BUILDERS = ("provider/coordination/", "provider/spark/", "provider/hooks/ledgers.py")
LEDGER_FACTORY = "ledger_on"
# Who may use the hook's factory on a client of their own, instead of ZooKeeperHook.ledger():
LEDGER_FACTORY_USERS = (
    "provider/hooks/",  # ZooKeeperHook.ledger itself
    # a triggerer's triggers share one session per connection (a hook's own session each would multiply
    # them by the triggers): triggers.lifecycle.session_ledger is their one way to a ledger
    "provider/triggers/lifecycle.py",
    # the command line reads outside any task, on a client it builds from its arguments: the cli wing
    # (it uses the core's connected_ledger today) and `airflow-epochs table cut`
    "provider/cli/",
    "provider/tables/cli_command.py",
)


def ledgers_built(source: str) -> list[int]:
    """Lines where ``source`` calls the ledger class (under any name it was imported as)."""
    tree = ast.parse(source)
    names = {LEDGER_CLASS} | {alias.asname for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                              for alias in node.names if alias.name == LEDGER_CLASS and alias.asname}
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id in names)
        or (isinstance(node.func, ast.Attribute) and node.func.attr == LEDGER_CLASS))]


def factory_uses(source: str) -> list[int]:
    """Lines where ``source`` uses the hook's ledger factory (calls it, or hands it on, as in
    ``partial(ledger_on, client)``), under any name it was imported as; importing it is not a use."""
    tree = ast.parse(source)
    names = {LEDGER_FACTORY} | {alias.asname for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                                for alias in node.names if alias.name == LEDGER_FACTORY and alias.asname}
    return sorted({node.lineno for node in ast.walk(tree) if (isinstance(node, ast.Name) and node.id in names)
                   or (isinstance(node, ast.Attribute) and node.attr == LEDGER_FACTORY)})


def test_every_airflow_side_ledger_comes_from_the_hook():
    built = [f"{path}:{line}" for path, _own, source in _modules() if not path.startswith(LEDGER_BUILDERS)
             for line in ledgers_built(source)]
    assert not built, ("build it with ZooKeeperHook.ledger(), or take a ledger factory from the caller: "
                       + "; ".join(built))
    used = [f"{path}:{line}" for path, _own, source in _modules() if not path.startswith(LEDGER_FACTORY_USERS)
            for line in factory_uses(source)]
    assert not used, ("ledger_on() on a client of one's own: use ZooKeeperHook.ledger(), or take a ledger "
                      "factory from the caller (as the views and the table cut do): " + "; ".join(used))


def test_the_views_and_the_table_cut_take_their_ledgers_from_the_caller():
    for path in ("provider/views/pipeline.py", "provider/tables/cut.py"):
        source = (ROOT / path).read_text()
        assert not factory_uses(source) and not ledgers_built(source), path
        assert "kazoo" not in source, f"{path} reads through ledgers, never a client of its own"


@pytest.mark.parametrize(("source", "expected"), [
    ("from airflow_epochs.hooks.ledgers import ledger_on\nledger = ledger_on(client, 'p')\n", [2]),
    ("from airflow_epochs.hooks.ledgers import ledger_on as make\nx = 1\nreader = StateReader(partial(make, zk))\n",
     [3]),
    ("import airflow_epochs.hooks.ledgers as h\nledger = h.ledger_on(client, 'p')\n", [2]),
    ("from airflow_epochs.hooks.ledgers import READER, ledger_on\nledger = hook.ledger('p', owner=READER)\n", []),
])
def test_the_factory_check_finds_a_use_of_ledger_on(source, expected):
    assert factory_uses(source) == expected


@pytest.mark.parametrize(("source", "expected"), [
    ("from airflow_epochs.coordination import EpochLedger\nledger = EpochLedger(client, 'p')\n", [2]),
    ("import airflow_epochs.coordination as c\nledger = c.EpochLedger(client, 'p')\n", [2]),
    ("from airflow_epochs.coordination import EpochLedger as L\nx = 1\nledger = L(client, 'p')\n", [3]),
    ("ledger = hook.ledger('p')\nisinstance(ledger, EpochLedger)\n", []),
])
def test_the_ledger_check_finds_a_hand_built_ledger(source, expected):
    assert ledgers_built(source) == expected
