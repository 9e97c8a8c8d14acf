"""Sphinx configuration of the airflow-provider-epochs documentation (built by scripts/docs.sh)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The example DAGs' folder, so that autodoc or a page can name a DAG module (the package itself is
# installed into the build's virtualenv: never imported from the working folder).
sys.path.insert(0, str(ROOT / "dags"))

project = "airflow-provider-epochs"
author = "airflow-provider-epochs contributors"
copyright = "the airflow-provider-epochs contributors"
release = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "sphinxarg.ext",
    "sphinx_design",
]
# No intersphinx: nothing is fetched at build or view time. References to third-party classes in our
# signatures cannot resolve, and are listed in nitpick_ignore_regex below with the reason.

exclude_patterns = ["_build", "examples/README.rst"]
templates_path: list[str] = []
html_static_path = ["_static"]
html_css_files = ["epochs.css"]  # long code lines wrap instead of being cut off
html_theme = "furo"
html_title = "airflow-provider-epochs"
html_show_sourcelink = False
# Furo's default loads nothing from the network; keep it so (no fonts, no analytics).

autodoc_default_options = {
    "members": True,
    "show-inheritance": True,
}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_class_signature = "separated"
autodoc_inherit_docstrings = False

nitpicky = True
# Third-party names in our signatures and docstrings: without intersphinx Sphinx has no page to link
# them to. Each pattern names a library whose own documentation lives elsewhere.
nitpick_ignore_regex = [
    # The standard library and typing constructs (Python's own docs, not fetched).
    (r"py:.*", r"(typing|collections\.abc|datetime|pathlib|enum|threading|concurrent\.futures|logging|asyncio)\..*"),
    # kazoo's client, its exceptions and its ACL records.
    (r"py:.*", r"kazoo\..*"),
    # Airflow's base classes, context, assets and triggers.
    (r"py:.*", r"airflow\..*"),
    # PySpark's session and DataFrame, pyiceberg's catalog and tables, pyarrow's tables.
    (r"py:.*", r"(pyspark|pyiceberg|pyarrow|pa)\..*"),
    # The same libraries' names as our docstrings spell them short.
    (r"py:class", r"(DataFrame|KazooClient|ZnodeStat|AirflowFailException|BaseOperator|SparkSubmitHook|Context|"
                  r"RetryDecision|ssl\.SSLContext|contextlib\..*)"),
    # Type variables of generic functions and classes (``Found[T]``) have no page of their own.
    (r"py:(class|obj)", r"(airflow_epochs\..*\.)?T"),
    # The coordination core's internal modules and the names in them that its docstrings mention: the
    # public names are documented under airflow_epochs.coordination, these modules (in its base/, state/,
    # recipes/... sub-packages) are not part of the API.
    (r"py:mod", r"(archive|delivery_scopes|events|lineage|locks)"),
    # Named by their defining module in a sub-package and not exported by airflow_epochs.coordination (an
    # exported name resolves through its canonical alias and never reaches this list).
    (r"py:class", r"airflow_epochs\.coordination\.(base|wire|state|protocol|recipes|services)\.\w+\.\w+"),
    (r"py:class",
     r"airflow_epochs\.coordination\.(\w+\.)?(session|retrying|backpressure|barrier_values|pipeline|manifests)\..*"),
    (r"py:class", r"(Call|Conflict|Watch)"),  # type aliases and internals that signatures name short
    (r"py:meth", r"Call\.send"),
    (r"py:attr", r"op_timeout"),
    (r"py:data", r"_?(COMPACT_PER_OPEN|MAX_CONSUMERS|MAX_LATE_NAMED)"),
]


def _resolve_public_name(app, env, node, contnode):  # type: ignore[no-untyped-def]
    """Resolve a Python reference that names an object by a module path it is not documented under.

    The API pages document each public name where users import it (``airflow_epochs.coordination.EpochLedger``),
    while signatures and docstrings name it by its defining module (``...coordination.ledger.EpochLedger``)
    or by a short name (``EpochLedger.vote``). The longest trailing part of the target that names exactly
    one documented object is taken; a name documented nowhere, or ambiguous, stays unresolved and fails
    the nitpicky build.
    """
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    domain = env.get_domain("py")
    # Only objects of the kinds the role names (a :mod: reference never lands on an attribute).
    kinds = set(domain.objtypes_for_role(node.get("reftype", "obj")) or ())
    objects = {name: entry for name, entry in domain.objects.items() if not kinds or entry.objtype in kinds}
    parts = target.split(".")
    for size in range(len(parts), 0, -1):
        suffix = ".".join(parts[-size:])
        # An object documented under its public name is also registered under its canonical (defining)
        # name, pointing at the same place: one place is one object.
        found = sorted({(objects[name].docname, objects[name].node_id): name for name in objects
                        if name == suffix or name.endswith("." + suffix)}.values())
        if len(found) == 1:
            entry = objects[found[0]]
            from sphinx.util.nodes import make_refnode

            return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, found[0])
        if found:
            return None
    return None


def setup(app):  # type: ignore[no-untyped-def]
    app.connect("missing-reference", _resolve_public_name)
