"""A znode read's answer is read by name, never by position: outside the record modules no code writes
``raw[0]``/``raw[1]`` for the bytes and stat of a read (a ``Znode``) or ``found[0]``/``found[1]`` for a
record and its stat (a ``Found``), and no annotation hands out a stat inside a bare tuple.

The rule, by syntax (``mypy --strict`` annotates every function, which makes it hold):

- a *read* is a call of ``get`` on a ZooKeeper handle (a name of :data:`ZK_HANDLES`: ``call.get``,
  ``store.get``, ``self.ctx.client.get``), of kazoo's ``get_acls`` and ``get_async(...).get()``, of the
  kernel's ``get_many`` and ``read_answer``, or of any function of the package whose return annotation
  names ``Znode`` or ``Found`` (a list, dict or iterator of them is a *batch*); a parameter annotated
  with one is a read too;
- a name bound from a read (``=``, ``:=``, ``for``, a comprehension; through ``await``, ``x if c else y``,
  ``zip``, ``enumerate``, a batch's items and values) holds one, and so does an item of a batch;
- a positional read is an integer subscript of a read, of a name that holds one, or of a read's call
  (``call.get(p)[0]``); unpacking (``data, stat = client.get(p)``) names the parts and is fine;
- a ``tuple[...]`` annotation with ``ZnodeStat`` in it, or ``tuple[bytes, Any]``, is a stat handed out by
  position.

What it cannot see: a pair built by hand and typed ``tuple[Record, Any]``, or a read kept inside a
container of tuples; both are written ``Found``/``Znode`` in the core, and ``mypy --strict`` types their
attributes.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
from test_core_shape import RECORD_MODULES

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = [ROOT / "provider", ROOT / "operators", ROOT / "sensors"]
# Where the named answers are defined.
DEFINED_IN = {"provider/coordination/base/znode.py"}
# What a name holds: one answer, a batch of them, or kazoo's pending answer of an asynchronous read.
ONE, MANY, PENDING = "one", "many", "pending"
# kazoo's reads and the kernel's batch reads, whatever their annotation says
KAZOO_READS = {"get_acls": ONE, "get_many": MANY, "read_answer": ONE, "get_async": PENDING, "get_acls_async": PENDING}
# ``get`` is also a mapping's: it is a read when its receiver is a ZooKeeper handle by name (the core's
# convention: a call, a node store, a kazoo client), or kazoo's pending answer
ZK_HANDLES = {"call", "store", "client", "zk", "live", "source"}
ZK_HANDLE_SUFFIXES = ("_call", "_client", "_store")
NAMED_ANSWERS = {"Znode", "Found"}
CONTAINERS = {"list", "Sequence", "dict", "Mapping", "Iterator", "Iterable", "AsyncIterator"}
PASS_THROUGH = {"list", "sorted", "dict", "tuple", "reversed"}


@functools.cache
def _parse(source: str) -> ast.Module:
    """One parse of each source text for all three checks."""
    return ast.parse(source)


def _named(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation
        try:
            return _named(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return None
    return None


def _is_handle(node: ast.AST) -> bool:
    name = _named(node) or ""
    return name in ZK_HANDLES or name.endswith(ZK_HANDLE_SUFFIXES)


def annotation_kind(node: ast.AST | None) -> str | None:
    """ONE for an annotation of a named answer (``Znode``, ``Found[X]``, ``Znode | None``), MANY for a
    container of them (``list[Znode | None]``, ``dict[str, Znode]``), else None."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
        return annotation_kind(node.left) or annotation_kind(node.right)
    name = _named(node.value if isinstance(node, ast.Subscript) else node)
    if name in NAMED_ANSWERS:
        return ONE
    if name == "Optional" and isinstance(node, ast.Subscript):
        return annotation_kind(node.slice)
    if name in CONTAINERS and isinstance(node, ast.Subscript):
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return MANY if any(annotation_kind(part) for part in parts) else None
    return None


def readers(sources: list[str]) -> dict[str, str]:
    """The functions whose answer is a read, by name: kazoo's and the kernel's, and every function of
    ``sources`` whose return annotation names a named answer (or a container of them)."""
    found = dict(KAZOO_READS)
    for source in sources:
        for node in ast.walk(_parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                kind = annotation_kind(node.returns)
                if kind is not None:
                    found[node.name] = kind
    return found


class _Scope:
    """What the names of one function hold (ONE, MANY), from its parameters and its bindings."""

    def __init__(self, reads: dict[str, str], outer: dict[str, str]) -> None:
        self.reads = reads
        self.names = dict(outer)

    def kind(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Await):
            return self.kind(node.value)
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.IfExp):
            return self.kind(node.body) or self.kind(node.orelse)
        if isinstance(node, ast.BoolOp):
            return next((k for k in map(self.kind, node.values) if k), None)
        if isinstance(node, ast.Subscript):
            return ONE if self.kind(node.value) == MANY and not isinstance(node.slice, ast.Slice) else None
        if isinstance(node, ast.Call):
            name = _named(node.func) or ""
            if isinstance(node.func, ast.Attribute):
                held = self.kind(node.func.value)
                if held == MANY:  # a batch's .get(k), .values()
                    return {"get": ONE, "pop": ONE, "values": MANY}.get(name)
                if name == "get":
                    return ONE if held == PENDING or _is_handle(node.func.value) else None
            if name in PASS_THROUGH and isinstance(node.func, ast.Name) and node.args:
                return self.kind(node.args[0])
            if name == "gather":  # asyncio.gather(*(store.get(p) for p in ps))
                return MANY if any(self.kind(arg) in (ONE, MANY) for arg in node.args) else None
            if name == "call" and node.args and isinstance(node.args[0], ast.Lambda):
                return self.kind(node.args[0].body)  # ctx.call(lambda call: epoch_record(call, ctx, e))
            return self.reads.get(name)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            return MANY if self.kind(node.elt) == ONE else None
        if isinstance(node, ast.Starred):
            return self.kind(node.value)
        return None

    def bind(self, target: ast.AST, kind: str | None) -> None:
        if kind is None:
            return
        if isinstance(target, ast.Name):
            self.names[target.id] = kind
        elif isinstance(target, (ast.Tuple, ast.List)) and kind == MANY:  # a, *rest = call.get_many(...)
            for element in target.elts:
                if isinstance(element, ast.Starred):
                    self.bind(element.value, MANY)
                else:
                    self.bind(element, ONE)

    def bind_items(self, target: ast.AST, source: ast.AST) -> None:
        """Bind the loop variable(s) ``target`` of a ``for`` over ``source``."""
        if self.kind(source) == MANY:
            self.bind(target, ONE)
            return
        if not isinstance(target, ast.Tuple) or not isinstance(source, ast.Call):
            return
        name = _named(source.func)
        if name == "zip":
            for element, argument in zip(target.elts, source.args, strict=False):
                self.bind(element, ONE if self.kind(argument) == MANY else None)
        elif name == "enumerate" and source.args and len(target.elts) == 2:
            self.bind(target.elts[1], ONE if self.kind(source.args[0]) == MANY else None)
        elif name == "items" and isinstance(source.func, ast.Attribute) and len(target.elts) == 2:
            self.bind(target.elts[1], ONE if self.kind(source.func.value) == MANY else None)

    def walk(self, body: list[ast.AST]) -> list[ast.AST]:
        """The nodes of ``body`` outside nested functions (each of those is a scope of its own)."""
        out: list[ast.AST] = []
        todo = list(body)
        while todo:
            node = todo.pop()
            out.append(node)
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                todo.extend(ast.iter_child_nodes(node))
        return out

    def settle(self, nodes: list[ast.AST]) -> None:
        while True:  # names bound from reads, then names bound from those
            before = dict(self.names)
            for node in nodes:
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        self.bind(target, self.kind(node.value))
                elif isinstance(node, ast.AnnAssign):
                    self.bind(node.target, annotation_kind(node.annotation)
                              or (self.kind(node.value) if node.value is not None else None))
                elif isinstance(node, ast.NamedExpr):
                    self.bind(node.target, self.kind(node.value))
                elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                    self.bind_items(node.target, node.iter)
            if self.names == before:
                return


def positional_reads(source: str, reads: dict[str, str] | None = None) -> list[tuple[int, str]]:
    """(line, expression) of each positional read of a read's answer in ``source`` (see the module's
    docstring for the rule); ``reads`` defaults to kazoo's and the kernel's reads and ``source``'s own."""
    tree = _parse(source)
    reads = readers([source]) if reads is None else reads
    found: list[tuple[int, str]] = []

    def visit(body: list[ast.AST], outer: dict[str, str], arguments: ast.arguments | None) -> None:
        scope = _Scope(reads, outer)
        if arguments is not None:
            for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
                scope.bind(ast.Name(arg.arg), annotation_kind(arg.annotation))
        nodes = scope.walk(body)
        scope.settle(nodes)
        for node in nodes:
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                    and isinstance(node.slice, (ast.Constant, ast.UnaryOp)) and scope.kind(node.value) == ONE:
                found.append((node.lineno, ast.unparse(node)))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(list(node.body), scope.names, node.args)
            elif isinstance(node, ast.ClassDef):
                visit(list(node.body), scope.names, None)
            elif isinstance(node, ast.Lambda):
                pass  # a lambda's body was walked with its scope's names

    visit(list(tree.body), {}, None)
    return sorted(set(found))


def _union(node: ast.AST) -> list[ast.AST]:
    """The members of ``X | Y | ...`` (``node`` itself if it is no union)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [*_union(node.left), *_union(node.right)]
    return [node]


def stat_tuples(source: str) -> list[tuple[int, str]]:
    """(line, annotation) of each ``tuple[...]`` annotation with ``ZnodeStat`` among its items."""
    found = []
    for node in ast.walk(_parse(source)):
        if isinstance(node, ast.Subscript) and _named(node.value) == "tuple":
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if any(_named(name) == "ZnodeStat" for part in parts for name in _union(part)) or \
                    [_named(part) for part in parts] == ["bytes", "Any"]:  # a read's answer, untyped
                found.append((node.lineno, ast.unparse(node)))
    return found


def _modules() -> list[tuple[str, str]]:
    return [(str(path.relative_to(ROOT)), path.read_text()) for root in PACKAGE for path in sorted(root.rglob("*.py"))]


def test_no_znode_answer_is_read_by_position_outside_the_record_modules():
    modules = _modules()
    reads = readers([source for _, source in modules])
    bad = [f"{module}:{line} {expr}" for module, source in modules if module not in RECORD_MODULES
           for line, expr in positional_reads(source, reads)]
    assert not bad, "read these by name (.data, .stat, .record) or unpack them: " + "; ".join(bad)


def test_no_stat_is_handed_out_in_a_bare_tuple():
    bad = [f"{module}:{line} {annotation}" for module, source in _modules()
           if module not in DEFINED_IN and module not in RECORD_MODULES for line, annotation in stat_tuples(source)]
    assert not bad, "hand a read out as a Znode or a Found (coordination/base/znode.py): " + "; ".join(bad)


def test_the_kernel_reads_are_found_by_their_annotations():
    reads = readers([(ROOT / "provider/coordination/base/call.py").read_text(),
                     (ROOT / "provider/coordination/base/aio.py").read_text(),
                     (ROOT / "provider/coordination/state/reader.py").read_text()])
    assert {reads["get"], reads["read_answer"], reads["epoch_record"], reads["attempt_record"]} == {ONE}
    assert reads["get_many"] == MANY


@pytest.mark.parametrize(("source", "expected"), [
    # a read's answer subscripted, through a name, a walrus, an await and the call itself
    ("def f(call, p):\n    raw = call.get(p)\n    return raw[0], raw[1].version\n",
     [(3, "raw[0]"), (3, "raw[1]")]),
    ("def f(call, p):\n    return call.get(p)[0]\n", [(2, "call.get(p)[0]")]),
    ("async def f(store, p):\n    if (node := await store.get(p)) is not None:\n        return node[1]\n",
     [(3, "node[1]")]),
    ("def f(client, p):\n    raw = client.get(p) if p else None\n    return raw[-1]\n", [(3, "raw[-1]")]),
    # a batch: its items are reads, the batch's own index is not a positional read
    ("def f(call, ps):\n    raws = call.get_many(ps)\n    return raws[0] is None or raws[0][0]\n",
     [(3, "raws[0][0]")]),
    ("def f(call, ps):\n    return [raw[0] for raw in call.get_many(ps) if raw]\n", [(2, "raw[0]")]),
    ("def f(call, ps):\n    for p, raw in zip(ps, call.get_many(ps)):\n        print(p[0], raw[1])\n",
     [(3, "raw[1]")]),
    ("def f(call, ps):\n    *votes, seal = call.get_many(ps)\n    return seal[0], [v[1] for v in votes]\n",
     [(3, "seal[0]"), (3, "v[1]")]),
    ("async def f(store, ps):\n    nodes = await asyncio.gather(*(store.get(p) for p in ps))\n"
     "    for p, node in zip(ps, nodes):\n        print(node[0])\n", [(4, "node[0]")]),
    ("def f(ctx, e):\n    found = ctx.call(lambda call: call.get(e), what='read')\n    return found[1]\n",
     [(3, "found[1]")]),
    ("def f(call, ps):\n    found: dict[str, Znode] = {}\n    return found['a'][0]\n", [(3, "found['a'][0]")]),
    # functions of the source annotated to return a named answer, and a parameter annotated with one
    ("def epoch_record(call, e) -> Found[EpochNode] | None: ...\n"
     "def f(call, e):\n    found = epoch_record(call, e)\n    return found[0].state\n", [(4, "found[0]")]),
    ("def subtree(call, top) -> dict[str, Znode]: ...\n"
     "def f(call):\n    nodes = subtree(call, '/')\n    return nodes['/a'][1], nodes.get('/b')[0]\n",
     [(4, "nodes.get('/b')[0]"), (4, "nodes['/a'][1]")]),
    ("def f(raw: Znode | None) -> int:\n    return raw[1].version\n", [(2, "raw[1]")]),
    ("def f(raw: 'Found[LeaseNode]') -> int:\n    return raw[1].version\n", [(2, "raw[1]")]),
    # a nested function sees its enclosing function's names
    ("def f(call, p):\n    raw = call.get(p)\n    def g():\n        return raw[0]\n    return g\n",
     [(4, "raw[0]")]),
    # by name, unpacked, or not a read at all: nothing to find
    ("def f(call, p):\n    raw = call.get(p)\n    data, stat = call.get(p)\n    return raw.data, raw.stat.version\n",
     []),
    ("def f(names, seen):\n    first = names[0]\n    return seen.get(first), first[1]\n", []),
    ("def f(call, p):\n    raw = call.get(p)\n\ndef g(raw):\n    return raw[0]\n", []),
    ("def f(self, name):\n    cached = self._tables.get(name)\n    return cached[1]\n", []),
    # kazoo's pending answers, and a handle reached through attributes
    ("def f(client, p):\n    answer = client.get_acls_async(p)\n    return answer.get(timeout=1)[0]\n",
     [(3, "answer.get(timeout=1)[0]")]),
    ("def f(self, p):\n    return self.ctx.client.get(p)[0]\n", [(2, "self.ctx.client.get(p)[0]")]),
])
def test_the_positional_read_check_finds_what_it_must(source, expected):
    assert positional_reads(source) == expected


@pytest.mark.parametrize(("source", "expected"), [
    ("def f() -> tuple[bytes, ZnodeStat] | None: ...\n", [(1, "tuple[bytes, ZnodeStat]")]),
    ("x: dict[str, tuple[EpochNode, 'ZnodeStat']] = {}\n", [(1, "tuple[EpochNode, 'ZnodeStat']")]),
    ("def f() -> tuple[SealStats | None, ZnodeStat | None]: ...\n",
     [(1, "tuple[SealStats | None, ZnodeStat | None]")]),
    ("def f(raw: tuple[bytes, Any] | None): ...\n", [(1, "tuple[bytes, Any]")]),
    ("def f() -> Found[EpochNode] | None: ...\ny: tuple[int, str] = (1, '')\n", []),
])
def test_the_stat_tuple_check_finds_what_it_must(source, expected):
    assert stat_tuples(source) == expected
