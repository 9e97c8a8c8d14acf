"""The coordination core's shape, checked: no function over 80 lines, and payloads decoded only in
the records module (everywhere else a stored record is read by attribute, never as a dict)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "provider" / "coordination"
PACKAGE = [ROOT / "provider", ROOT / "operators", ROOT / "sensors"]

MAX_FUNCTION_LINES = 80
WIRE = "provider/coordination/wire/"
# Where payloads are decoded: the records module and the envelope it uses.
RECORD_MODULES = {"provider/coordination/wire/nodes.py", "provider/coordination/wire/payloads.py",
                  "provider/coordination/wire/manifests.py", "provider/coordination/wire/vote_records.py",
                  "provider/coordination/wire/compaction_record.py",
                  # each recipe family's records, and the declared producers'
                  *(str(path.relative_to(ROOT)) for path in CORE.rglob("records.py"))}
# Still decoding by hand, each for a stated reason; a module leaves this list once it reads records.
PENDING: set[str] = set()
# Payloads still read by key, each for a stated reason; a module leaves this list once it reads records.
PENDING_KEY_READS: dict[str, str] = {}
# The names a decoded document goes by: a payload (``doc``) or a request's stored result (``stored``).
RAW_DOCUMENTS = {"doc", "stored"}


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(name, lines) of every function or method in ``source`` longer than ``limit`` lines."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                out.append((node.name, lines))
    return out


def raw_payload_reads(source: str) -> list[tuple[str, int]]:
    """(enclosing function, line) of each raw payload read in ``source``: a payload decoded by hand
    (``payloads.decode`` or ``decode`` imported from it), a ``doc[...]``/``doc.get(...)`` read, or one
    of a request's stored result (``stored[...]``/``stored.get(...)``, as ``stored_result`` gives it)."""
    tree = ast.parse(source)
    decoders = {"decode"} if any(
        isinstance(node, ast.ImportFrom) and (node.module or "").endswith("payloads")
        and any(alias.name == "decode" for alias in node.names)
        for node in ast.walk(tree)
    ) else set()
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            # a nested function's reads count for the outermost function (the one a PENDING entry names)
            outermost = function == "<module>" and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            name = child.name if outermost else function
            if _is_raw_read(child, decoders):
                found.append((function, getattr(child, "lineno", 0)))
            visit(child, name)

    visit(tree, "<module>")
    return found


def _is_raw_read(node: ast.AST, decoders: set[str]) -> bool:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "decode" and isinstance(func.value, ast.Name) \
                and func.value.id == "payloads":
            return True
        if isinstance(func, ast.Name) and func.id in decoders:
            return True
        if isinstance(func, ast.Attribute) and func.attr == "get" and isinstance(func.value, ast.Name) \
                and func.value.id in RAW_DOCUMENTS:
            return True
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
        and node.value.id in RAW_DOCUMENTS and isinstance(node.ctx, ast.Load)


# The payloads still read as mappings somewhere: a value named (or bound from) one of these is a record's
# payload, and a string key read on it (``x["rows"]``, ``x.get("rows")``) belongs in a record of wire/.
PAYLOADS = {"detail", "manifest", "manifests", "status"}
KEY_READ_METHODS = {"get", "pop", "setdefault"}
MAPPING_METHODS = KEY_READ_METHODS | {"values", "items"}


def payload_key_reads(source: str) -> list[tuple[int, str]]:
    """(line, expression) of each string-key read on a payload in ``source``: on a name or attribute of
    :data:`PAYLOADS` (``event.detail``, ``seal.manifests``, ``barrier.status()``), or on a name bound
    from one (``m = seal.manifests[p]``, ``for m in seal.manifests.values()``), through any chain of
    reads (``manifest.get("outputs")["data"]``)."""
    tree = ast.parse(source)
    bound: set[str] = set()

    def tainted(node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in PAYLOADS or node.id in bound
        if isinstance(node, ast.Attribute):  # an attribute of a record is typed; only a payload's name counts
            return node.attr in PAYLOADS
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return node.func.attr in PAYLOADS or (node.func.attr in MAPPING_METHODS and tainted(node.func.value))
        if isinstance(node, ast.Subscript):
            return tainted(node.value)
        if isinstance(node, ast.BoolOp):
            return any(tainted(v) for v in node.values)
        if isinstance(node, ast.IfExp):
            return tainted(node.body) or tainted(node.orelse)
        return False

    def targets(node: ast.AST) -> list[str]:
        return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]

    def binds(node: ast.AST) -> list[str]:
        """The names ``node`` binds from a payload (none if it binds nothing, or nothing from one)."""
        if isinstance(node, ast.Assign):
            return [name for t in node.targets for name in targets(t)] if tainted(node.value) else []
        if isinstance(node, (ast.AnnAssign, ast.NamedExpr)):
            return targets(node.target) if node.value is not None and tainted(node.value) else []
        if isinstance(node, (ast.For, ast.comprehension)):
            return targets(node.target) if tainted(node.iter) else []
        return []

    def key_read(node: ast.AST) -> bool:
        if isinstance(node, ast.Subscript):
            return isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str) and tainted(node.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return node.func.attr in KEY_READ_METHODS and bool(node.args) \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
                and tainted(node.func.value)
        return False

    changed = True
    while changed:  # names bound from payloads, then names bound from those
        before = len(bound)
        for node in ast.walk(tree):
            bound.update(binds(node))
        changed = len(bound) != before
    found = [(node.lineno, ast.unparse(node)) for node in ast.walk(tree) if key_read(node)]
    return sorted(found)


def _modules(roots: list[Path]) -> list[tuple[str, str]]:
    return [(str(path.relative_to(ROOT)), path.read_text()) for root in roots for path in sorted(root.rglob("*.py"))]


def test_no_function_in_the_core_is_over_80_lines():
    too_long = [f"{module}: {name} ({lines} lines)" for module, source in _modules([CORE])
                for name, lines in long_functions(source)]
    assert not too_long, "split these into steps you can read top to bottom: " + "; ".join(too_long)


def test_payloads_are_decoded_only_in_the_records_module():
    raw = [f"{module}:{line} in {function}" for module, source in _modules(PACKAGE) if module not in RECORD_MODULES
           for function, line in raw_payload_reads(source)
           if module not in PENDING and f"{module}:{function}" not in PENDING]
    assert not raw, "read these through a record of coordination/wire/: " + "; ".join(raw)


def test_no_payload_is_read_by_key_outside_the_record_modules():
    reads = [f"{module}:{line} {expr}" for module, source in _modules(PACKAGE)
             if not module.startswith(WIRE) and module not in PENDING_KEY_READS
             for line, expr in payload_key_reads(source)]
    assert not reads, "read these through a record of coordination/wire/ (by attribute): " + "; ".join(reads)


def test_every_pending_key_read_still_exists():
    """An entry of PENDING_KEY_READS whose key reads are gone must leave the list (it only shrinks)."""
    stale = [module for module in PENDING_KEY_READS
             if not (ROOT / module).exists() or not payload_key_reads((ROOT / module).read_text())]
    assert not stale, f"no key reads left in {stale}: remove them from PENDING_KEY_READS"


@pytest.mark.parametrize(("source", "expected"), [
    ("def f(event):\n    return event.detail['epoch'], event.detail.get('owner')\n",
     [(2, "event.detail.get('owner')"), (2, "event.detail['epoch']")]),
    ("def f(barrier):\n    status = barrier.status()\n    return status['late']\n", [(3, "status['late']")]),
    ("def f(seal):\n    for m in seal.manifests.values():\n        print(m.get('location'))\n",
     [(3, "m.get('location')")]),
    ("def f(seal, p):\n    item = (seal.manifests[p].get('outputs') or {})['data']\n    return item['rows']\n",
     [(2, "(seal.manifests[p].get('outputs') or {})['data']"), (2, "seal.manifests[p].get('outputs')"),
      (3, "item['rows']")]),
    ("def f(event, conf):\n    return event.record.epoch, conf['core'], event.detail.items()\n", []),
    ("def f(status):\n    for e in status.epochs:\n        print(e.summary['rows'])\n", []),
])
def test_the_key_read_check_finds_what_it_must(source, expected):
    assert payload_key_reads(source) == expected


def test_every_pending_exception_still_exists():
    """An entry of PENDING whose raw reads are gone must leave the list (so the list only shrinks)."""
    reads = {module: raw_payload_reads(source) for module, source in _modules(PACKAGE)}
    stale = []
    for entry in PENDING:
        module, _, function = entry.partition(":")
        hits = reads.get(module, [])
        if not any(function in ("", name) for name, _ in hits):
            stale.append(entry)
    assert not stale, f"no raw reads left in {stale}: remove them from PENDING"


@pytest.mark.parametrize(("source", "expected"), [
    ("from airflow_epochs.coordination import payloads\ndef f(raw):\n    return payloads.decode('x', raw)['a']\n",
     [("f", 3)]),
    ("from airflow_epochs.coordination.wire.payloads import decode\ndef g(raw):\n    return decode('x', raw)\n",
     [("g", 3)]),
    ("def h(doc):\n    return doc['state'], doc.get('owner')\n", [("h", 2), ("h", 2)]),
    ("def k(node):\n    return node.state\n", []),
    ("def m(ctx, call):\n    stored = ctx.stored_result(call)\n    return stored['acked'], stored.get('x')\n",
     [("m", 3), ("m", 3)]),
])
def test_the_raw_read_check_finds_what_it_must(source, expected):
    assert sorted(raw_payload_reads(source)) == sorted(expected)


def test_the_length_check_counts_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(85))
    assert long_functions(f"def big():\n{body}\n") == [("big", 86)]
    assert long_functions("def small():\n    return 1\n") == []


def test_the_command_line_the_spark_driver_and_the_core_do_not_load_airflow():
    """Importing Airflow configures its logging on the process's streams and costs seconds: the command
    line, a Spark driver's modules and the coordination core must not pull it in."""
    import subprocess
    import sys

    code = ("import sys\n"
            "import airflow_epochs.cli, airflow_epochs.cli.parser, airflow_epochs.coordination, airflow_epochs.spark\n"
            "import airflow_epochs.tables, airflow_epochs.coordination.base.retrying\n"
            "airflow_epochs.cli.parser.build_parser()\n"
            "print(sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[]", run.stdout
