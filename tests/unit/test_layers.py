"""The package's shape, checked: the coordination core's layers and families (no import points up a
layer, at run time or for types; the kernel imports no family; a family imports the kernel and only
the families it names) and the length of every module of the package (at most 700 lines).

The kernel's layers, lowest first: ``base`` < ``wire`` < ``state`` < ``protocol``. Above the kernel the
recipe families (``recipes/<family>/`` folders and one-module recipes ``recipes/<name>.py``), each
importing the kernel and the families :data:`FAMILIES` names for it; then the face (``ledger.py``),
which binds every family; then what takes a ledger (``declared``, ``services``, ``deprecated``).
The package index (``coordination/__init__.py``) is the public export list: it re-exports names from
everywhere, and so no module of the core imports the index itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "provider" / "coordination"
CORE_PACKAGE = "airflow_epochs.coordination"
PACKAGE = [ROOT / "provider", ROOT / "operators", ROOT / "sensors"]

KERNEL = ("base", "wire", "state", "protocol")
# Each recipe family -> the families it may import (besides the kernel). Widen only with a reason.
FAMILIES: dict[str, frozenset[str]] = {
    "barriers": frozenset(),
    "leadership": frozenset(),
    "backpressure": frozenset(),
    "corrections": frozenset(),
    "delivery": frozenset({"corrections"}),  # a re-sealed version is delivered as its own event
    "deadlines": frozenset({"backpressure"}),  # a consumer may declare a deadline of its own
    "locks": frozenset(),
    "waits": frozenset(),
    "lineage": frozenset({"corrections"}),  # a re-sealed seal's lineage names the version it read
}
FACE = ("ledger",)
ABOVE = ("declared", "services", "deprecated")
INDEX = "__init__"
# Rank of each kind of unit; a unit imports units of a lower rank, its own unit, or (families) the
# families it names.
_RANK = {**{layer: i for i, layer in enumerate(KERNEL)}, "recipes": len(KERNEL), **dict.fromkeys(FACE, len(KERNEL) + 1),
         **dict.fromkeys(ABOVE, len(KERNEL) + 2), INDEX: len(KERNEL) + 3}
MAX_MODULE_LINES = 700
# Over the limit for a stated reason; an entry leaves once its module is back under the limit.
LONG_PENDING: dict[str, str] = {}


def layer_of(module: str) -> str:
    """The unit of a module of the core, by its path under ``coordination/`` (``wire/nodes.py``,
    ``recipes/barriers/barrier.py``) or its dotted name below the package (``wire.nodes``,
    ``recipes.barriers.records``): a kernel layer, ``recipes.<family>``, a face module, ``declared``,
    ``services`` or the index."""
    parts = module.removesuffix(".py").replace("/", ".").split(".")
    first = parts[0]
    if first == "recipes":
        if len(parts) < 2 or parts[1] == INDEX:
            return "recipes"
        if parts[1] not in FAMILIES:
            raise ValueError(f"{module!r} is in no family of the core: add it to FAMILIES")
        return f"recipes.{parts[1]}"
    if first not in (*KERNEL, *FACE, *ABOVE, INDEX):
        raise ValueError(f"{module!r} is in no layer of the core: add it to KERNEL, FACE or ABOVE")
    return first


def _rank(unit: str) -> int:
    return _RANK[unit.split(".")[0]]


def imported_modules(source: str) -> list[tuple[str, int]]:
    """(dotted name below the core, line) of every import of the core in ``source``, including those
    under ``if TYPE_CHECKING:``; ``""`` is the package index itself."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            if name == CORE_PACKAGE or name.startswith(CORE_PACKAGE + "."):
                found.append((name[len(CORE_PACKAGE) + 1:], node.lineno))
    return found


def upward_imports(module: str, source: str) -> list[tuple[int, str]]:
    """(line, what) of each import in the core module ``module`` (path under ``coordination/``) that
    points up a layer, at a family not named for it, or at the package index from inside the core."""
    own = layer_of(module)
    bad: list[tuple[int, str]] = []
    for target, line in imported_modules(source):
        if own == INDEX:
            continue  # the index exports from everything
        if not target:
            bad.append((line, f"imports the package index {CORE_PACKAGE} (import from the module itself)"))
            continue
        theirs = layer_of(target)
        if theirs == own or theirs == "recipes":
            continue
        if own.startswith("recipes.") and theirs.startswith("recipes."):
            if theirs.split(".")[1] not in FAMILIES[own.split(".")[1]]:
                bad.append((line, f"family {own} imports family {theirs} ({target}), which FAMILIES does not name"))
            continue
        if _rank(theirs) >= _rank(own):
            kind = "the kernel" if own in KERNEL and theirs.startswith("recipes.") else own
            bad.append((line, f"{kind} imports {theirs} ({target})"))
    return bad


def relative_imports(source: str) -> list[int]:
    """Lines of relative imports (``from . import x``): the layer check reads absolute names only."""
    return [node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom) and node.level]


def _core_modules() -> list[tuple[str, str]]:
    return [(str(path.relative_to(CORE)), path.read_text()) for path in sorted(CORE.rglob("*.py"))]


def _package_modules() -> list[tuple[str, Path]]:
    return [(str(path.relative_to(ROOT)), path) for root in PACKAGE for path in sorted(root.rglob("*.py"))]


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_import_in_the_core_points_up_a_layer():
    bad = [f"{module}:{line}: {what}" for module, source in _core_modules()
           for line, what in upward_imports(module, source)]
    assert not bad, "move the code down, or the import's user up: " + "; ".join(bad)


def test_the_core_uses_absolute_imports_only():
    relative = [f"{module}:{line}" for module, source in _core_modules() for line in relative_imports(source)]
    assert not relative, "write these as airflow_epochs.coordination.<layer>.<module>: " + "; ".join(relative)


def test_every_module_of_the_package_is_at_most_700_lines():
    long = [f"{module} ({_lines(path)} lines)" for module, path in _package_modules()
            if module not in LONG_PENDING and _lines(path) > MAX_MODULE_LINES]
    assert not long, "split these by topic: " + "; ".join(long)


def test_every_long_module_pending_is_still_long():
    """An entry of LONG_PENDING whose module is back under the limit (or gone) must leave the list."""
    stale = [module for module in LONG_PENDING
             if not (ROOT / module).exists() or _lines(ROOT / module) <= MAX_MODULE_LINES]
    assert not stale, f"under {MAX_MODULE_LINES} lines now: remove {stale} from LONG_PENDING"


@pytest.mark.parametrize(("module", "source", "expected"), [
    ("recipes/lineage.py", "from airflow_epochs.coordination.ledger import EpochLedger\n",
     [(1, "recipes.lineage imports ledger (ledger)")]),
    ("recipes/lineage.py",
     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
     "    from airflow_epochs.coordination.ledger import EpochLedger\n",
     [(3, "recipes.lineage imports ledger (ledger)")]),
    ("wire/nodes.py", "import airflow_epochs.coordination.state.reader as reader\n",
     [(1, "wire imports state (state.reader)")]),
    ("protocol/retention.py", "from airflow_epochs.coordination.recipes.delivery.scopes import delivery_floor\n",
     [(1, "the kernel imports recipes.delivery (recipes.delivery.scopes)")]),
    ("state/reader.py", "from airflow_epochs.coordination.recipes.barriers import Barrier\n",
     [(1, "the kernel imports recipes.barriers (recipes.barriers)")]),
    ("recipes/barriers/barrier.py", "from airflow_epochs.coordination.recipes.deadlines.records import LateAlert\n",
     [(1, "family recipes.barriers imports family recipes.deadlines (recipes.deadlines.records), which FAMILIES "
          "does not name")]),
    ("recipes/deadlines/deadlines.py", "from airflow_epochs.coordination.recipes.backpressure import Consumer\n", []),
    ("recipes/deadlines/stats.py", "from airflow_epochs.coordination.recipes.deadlines.records import Sample\n", []),
    ("recipes/delivery/scopes.py", "from airflow_epochs.coordination.ledger import EpochLedger\n",
     [(1, "recipes.delivery imports ledger (ledger)")]),
    ("base/paths.py", "from airflow_epochs.coordination import EpochLedger\n",
     [(1, "imports the package index airflow_epochs.coordination (import from the module itself)")]),
    ("services/coordinator.py", "from airflow_epochs.coordination import EpochLedger\n",
     [(1, "imports the package index airflow_epochs.coordination (import from the module itself)")]),
    ("state/reader.py", "from airflow_epochs.coordination.wire.nodes import EpochNode\n"
                        "from airflow_epochs.coordination.state import history\n", []),
    ("ledger.py", "from airflow_epochs.coordination.recipes.locks import resource_lock\n", []),
    ("ledger.py", "from airflow_epochs.coordination.declared.votes import stage_vote\n",
     [(1, "ledger imports declared (declared.votes)")]),
    ("services/coordinator.py", "from airflow_epochs.coordination.ledger import EpochLedger\n", []),
    ("declared/votes.py", "from airflow_epochs.coordination.recipes.backpressure import Consumer\n", []),
    ("__init__.py", "from airflow_epochs.coordination.services.coordinator import open_as_leader\n", []),
    ("protocol/votes.py", "from airflow_epochs.tables import catalog\n", []),
])
def test_the_layer_check_finds_what_it_must(module, source, expected):
    assert upward_imports(module, source) == expected


def test_the_layer_check_refuses_a_module_in_no_layer():
    with pytest.raises(ValueError, match="no layer"):
        layer_of("misc/helpers.py")
    with pytest.raises(ValueError, match="no family"):
        layer_of("recipes/gossip/rumours.py")


def test_the_kernel_drawn_alone_imports_no_family():
    """The kernel (base, wire, state, protocol) imports no recipe family, no face and nothing above."""
    bad = [f"{module}:{line}: {target}" for module, source in _core_modules() if layer_of(module) in KERNEL
           for target, line in imported_modules(source) if target and layer_of(target) not in KERNEL]
    assert not bad, "the kernel must not know the families: " + "; ".join(bad)


def test_every_family_folder_is_named():
    """A new folder under ``recipes/`` is a family and must be given its allowed imports."""
    folders = {path.name for path in (CORE / "recipes").iterdir() if path.is_dir() and path.name != "__pycache__"}
    modules = {path.stem for path in (CORE / "recipes").glob("*.py") if path.stem != INDEX}
    assert folders | modules == set(FAMILIES), (folders | modules) ^ set(FAMILIES)


def test_the_relative_import_check_finds_one():
    assert relative_imports("from . import nodes\nfrom airflow_epochs.coordination.wire import nodes\n") == [1]


def test_the_length_check_counts_a_long_module(tmp_path):
    long, short = tmp_path / "long.py", tmp_path / "short.py"
    long.write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    short.write_text("x = 1\n" * MAX_MODULE_LINES)
    assert _lines(long) > MAX_MODULE_LINES >= _lines(short)
