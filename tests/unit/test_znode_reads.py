"""No code outside the coordination core reads or writes a znode by path: a trigger's check is its
family's watch, a command's listing is the kernel's; outside the core, ZooKeeper is reached through the
ledger, the families' handles and watches, or the kernel's functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = [ROOT / "provider", ROOT / "operators", ROOT / "sensors"]
CORE = ROOT / "provider" / "coordination"
# kazoo's calls that take a znode path first (sync and async)
ZNODE_CALLS = {"get", "exists", "get_children", "children", "create", "set", "set_data", "delete", "ensure_path",
               "get_async", "exists_async", "get_children_async", "create_async", "set_async", "delete_async",
               "ensure_path_async", "transaction"}
# what a path is built from: the layout's classes and their attributes
PATH_BUILDERS = {"PipelinePaths", "DeliveryPaths", "DeadlinePaths", "BarrierPaths"}
PATH_NAMES = {"paths", "path", "base", "root", "cursor", "claim"}
# Modules that list what is not a pipeline's, each with its reason.
ALLOWED: dict[str, str] = {
    "provider/servers/zookeeper_security.py": "the embedded server locks the ensemble's own top nodes (no pipeline's)",
}


def _mentions_a_path(node: ast.AST) -> bool:
    for part in ast.walk(node):
        if isinstance(part, ast.Name) and (part.id in PATH_BUILDERS or part.id in PATH_NAMES):
            return True
        if isinstance(part, ast.Attribute) and (part.attr in PATH_NAMES or part.attr in PATH_BUILDERS):
            return True
    return False


def path_reads(source: str) -> list[int]:
    """Lines of calls of a znode operation whose first argument is built from a pipeline's layout."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ZNODE_CALLS \
                and node.args and _mentions_a_path(node.args[0]):
            found.append(node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in {"get_children", "get_children_async", "children"}:
            found.append(node.lineno)  # a listing outside the core: whatever it lists, the kernel lists it
    return sorted(set(found))


def _outside_modules() -> list[tuple[str, str]]:
    paths = [path for folder in OUTSIDE for path in sorted(folder.rglob("*.py")) if CORE not in path.parents]
    return [(str(path.relative_to(ROOT)), path.read_text()) for path in paths]


def test_no_znode_is_read_by_path_outside_the_core():
    bad = [f"{module}:{line}" for module, source in _outside_modules() if module not in ALLOWED
           for line in path_reads(source)]
    assert not bad, "read through the ledger, a family's handle or watch, or a kernel function: " + "; ".join(bad)


@pytest.mark.parametrize(("source", "expected"), [
    ("await zk.get(self.paths.frontier, wake)\n", [1]),
    ("client.exists(PipelinePaths('p').base)\n", [1]),
    ("names = client.get_children(root)\n", [1]),
    ("await zk.exists(DeliveryPaths(paths).cursor('s', 'a'))\n", [1]),
    ("client.exists('/')\n", []),
    ("ledger.frontier()\n", []),
    ("props.get(ACTION)\n", []),
])
def test_the_check_finds_what_it_must(source, expected):
    assert path_reads(source) == expected
