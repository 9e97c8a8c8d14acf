"""Nothing outside the coordination core reads a znode by its path: triggers, operators, sensors, views,
the UI and the command line ask a family's watch or a core function, which know the records' paths and
how to decode what they find. A read there is a call of a ZooKeeper read (``get``, ``exists``,
``get_children``, their async and batched forms) whose path is a pipeline path (anything taken from a
``paths`` object or a :class:`PipelinePaths`) or a literal znode path (a string starting with ``/``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = [ROOT / "operators", ROOT / "sensors",
           *(p for p in (ROOT / "provider").iterdir() if p.name not in ("coordination", "__pycache__"))]
READS = frozenset({"get", "exists", "get_children", "get_many", "exists_many",
                   "get_async", "exists_async", "get_children_async"})
# No record read: the hook's probe that a session works, and the embedded server's sweep of the ACLs of
# what lies under its own root.
ALLOWED = {("provider/hooks/zookeeper.py", "/"), ("provider/servers/zookeeper_security.py", "/")}


def _is_pipeline_path(node: ast.expr) -> bool:
    for part in ast.walk(node):
        if isinstance(part, ast.Name) and part.id in ("paths", "PipelinePaths"):
            return True
        if isinstance(part, ast.Attribute) and part.attr == "paths":
            return True
    return False


def znode_reads(source: str) -> list[tuple[int, str]]:
    """(line, path expression) of each read of a pipeline's znode or a literal znode path in ``source``."""
    tree = ast.parse(source)
    routes = {id(d) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
              for d in node.decorator_list}  # a web route (``@app.get("/api/...")``) is no read
    found = []
    for node in ast.walk(tree):
        if id(node) in routes or not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                                      and node.func.attr in READS and node.args):
            continue
        path = node.args[0]
        literal = isinstance(path, ast.Constant) and isinstance(path.value, str) and path.value.startswith("/")
        if literal or _is_pipeline_path(path):
            found.append((node.lineno, ast.unparse(path)))
    return found


def _files() -> list[Path]:
    out: list[Path] = []
    for place in OUTSIDE:
        out += [place] if place.suffix == ".py" else sorted(place.rglob("*.py")) if place.is_dir() else []
    return out


def test_no_znode_is_read_by_its_path_outside_the_core():
    assert len(_files()) > 50  # the walk found the package's wings
    found = [f"{f.relative_to(ROOT)}:{line}: {path}" for f in _files()
             for line, path in znode_reads(f.read_text())
             if (str(f.relative_to(ROOT)), path.strip("'\"")) not in ALLOWED]
    assert not found, "read these through a family's watch or a core function:\n" + "\n".join(found)


@pytest.mark.parametrize(("source", "expected"), [
    ("zk.get(self.paths.seal(1, 1, 'p'))", ["self.paths.seal(1, 1, 'p')"]),
    ("await store.exists(paths.frontier, wake)", ["paths.frontier"]),
    ("client.get_children(PipelinePaths('x', '/r').base)", ["PipelinePaths('x', '/r').base"]),
    ("client.get('/epochs/x/frontier')", ["'/epochs/x/frontier'"]),
    ("props.get(ACTION)", []),
    ("os.environ.get('HOME')", []),
    ("cache.get(key)", []),
    ("@app.get('/api/pipelines')\ndef pipelines(): ...", []),
    ("ledger.frontier()", []),
])
def test_the_read_check_finds_what_it_must(source, expected):
    assert [path for _, path in znode_reads(source)] == expected
