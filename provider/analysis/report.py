"""How ``airflow-epochs analyze`` shows a coordination analysis: a table, JSON, Graphviz DOT, a PNG;
and the measured figure its over-coordination warnings cite.

No Airflow import; matplotlib only for the PNG.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_epochs.analysis.dag_walk import DagAnalysis
from airflow_epochs.analysis.labels import StreamLabel
from airflow_epochs.analysis.rules import Analysis, ComponentReport

BENCH_FILE = Path(".epochs") / "bench.json"
_BENCH_ID = re.compile(r"^sealing_eps_p(\d+)$")
_BENCH_MEASURE = re.compile(r"^epochs sealed per second, (\d+) producers?$")


@dataclass(frozen=True)
class SealingFigure:
    """Sealing against one global lock, from the sealing benchmark's widest measured row."""

    source: str
    row: str
    producers: int
    sealing: float
    lock: float
    mode: str

    @property
    def ratio(self) -> float:
        """Sealing's throughput over the lock's (above 1: sealing is faster)."""
        return self.sealing / self.lock

    def sentence(self) -> str:
        faster = f"{self.ratio:.2f}x the lock's throughput" + (
            "" if self.ratio >= 1 else ": on this machine sealing is slower, so the case for it here is "
                                        "fewer synchronisation points, not speed")
        return (f"measured here ({self.source}, row {self.row}, {self.mode} run): sealing {self.sealing:.3g} "
                f"epochs/s against {self.lock:.3g} epochs/s under one global ZooKeeper lock with "
                f"{self.producers} producers, {faster}")


def find_bench_file(starts: Sequence[Path]) -> Path | None:
    """The nearest ``.epochs/bench.json`` in any of ``starts`` or their parents."""
    for start in starts:
        here = start.resolve()
        for folder in (here, *here.parents):
            candidate = folder / BENCH_FILE
            if candidate.is_file():
                return candidate
    return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def sealing_figure(path: Path | None) -> SealingFigure | None:
    """Read the sealing-vs-lock row with the most producers from a benchmark result file (rows with a
    stable id ``sealing_eps_p<N>``, or, in older files, the measure ``epochs sealed per second, N
    producers``). ``None`` when the file is missing, unreadable or has no such row."""
    if path is None:
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    rows = data.get("rows") if isinstance(data, dict) else None
    best: SealingFigure | None = None
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        match = _BENCH_ID.match(str(row.get("id", ""))) or _BENCH_MEASURE.match(str(row.get("measure", "")))
        sealing, lock = _number(row.get("ours")), _number(row.get("peer"))
        if match is None or sealing is None or lock is None:
            continue
        producers = int(match.group(1))
        if best is None or producers > best.producers:
            mode = str((data.get("machine") or {}).get("mode", "unknown"))
            best = SealingFigure(str(path), str(row.get("id") or row.get("measure")), producers, sealing, lock, mode)
    return best


def benchmark_sentence(figure: SealingFigure | None) -> str:
    if figure is None:
        return ("the sealing benchmark's figure is not measured on this machine (no .epochs/bench.json with a "
                "sealing row: run scripts/bench.sh)")
    return figure.sentence()


def shown_path(path: str) -> str:
    """``path`` relative to the current folder when it lies inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def render_table(results: Sequence[DagAnalysis], figure: SealingFigure | None) -> str:
    """One table per DAG (task, label, input, output, verdict), then the findings."""
    out: list[str] = []
    for result in results:
        analysis = result.analysis
        out.append(f"DAG {result.dag_id} ({shown_path(result.fileloc)})")
        out.append(f"input of its first tasks: {result.source} ({result.source_reason})")
        out.append("")
        rows = [["task", "label", "input", "output", "verdict"]]
        for item in analysis.components:
            rows.append([item.name, item.component.label_text, str(item.input), str(item.output), item.verdict])
        out.extend(_table(rows))
        out.append("")
        out.append(f"dataflow output: {analysis.output}")
        for finding in analysis.under:
            out.append(f"UNDER-COORDINATION {finding.component}: missing {finding.missing}. {finding.message}")
        for finding in analysis.over:
            out.append(f"over-coordination {finding.component}: {finding.message}; {benchmark_sentence(figure)}")
        if analysis.unlabelled:
            out.append(f"unlabelled (treated as order-sensitive on an unknown gate): {', '.join(analysis.unlabelled)}")
        notes = [f"  {item.name}: {item.component.note}" for item in analysis.components if item.component.note]
        if notes:
            out.append("notes:")
            out.extend(notes)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def render_json(results: Sequence[DagAnalysis], figure: SealingFigure | None) -> dict[str, Any]:
    """Everything the table shows, and the benchmark figure, as one JSON-ready dictionary."""
    return {
        "dags": [
            {"dag_id": r.dag_id, "fileloc": r.fileloc, "source": str(r.source), "source_reason": r.source_reason,
             **r.analysis.to_json()}
            for r in results
        ],
        "benchmark": None if figure is None else {
            "source": figure.source, "row": figure.row, "producers": figure.producers,
            "sealing_epochs_per_s": figure.sealing, "lock_epochs_per_s": figure.lock, "ratio": figure.ratio,
            "mode": figure.mode},
        "over_coordination_reason": benchmark_sentence(figure),
        "under_coordinated": any(r.analysis.under for r in results),
    }


# -- drawing ----------------------------------------------------------------------------------------

COLOURS = {"missing": "#f4c7c3", "over": "#fce8b2", "coordinated": "#b7e1cd", "none": "#eeeeee"}
INPUT_NODE = "(input)"


def status_of(item: ComponentReport, analysis: Analysis) -> str:
    """``missing``, ``over``, ``coordinated`` (a seal or an order meets a need) or ``none``."""
    if any(p.status == "missing" for p in item.paths):
        return "missing"
    if any(f.component == item.name for f in analysis.over):
        return "over"
    if any(p.need != "none" for p in item.paths):
        return "coordinated"
    return "none"


def _inputs(item: ComponentReport, source: StreamLabel) -> list[tuple[str, str, bool]]:
    """Edges from outside the DAG into ``item``: (label, kind, dashed)."""
    edges = []
    if not item.upstream and item.component.external is None:
        edges.append((str(item.component.source or source), "run", False))
    if item.component.external is not None:
        edges.append((str(item.component.external), "external", True))
    return edges


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render_dot(results: Sequence[DagAnalysis]) -> str:
    """Graphviz DOT: one node per task (label and verdict, coloured by status), stream labels on the
    edges, and a plain ``(input)`` node for what the DAG run or an external source hands a task."""
    many = len(results) > 1
    lines = ["digraph blazes {", "  rankdir=LR;",
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9];']
    for index, result in enumerate(results):
        analysis = result.analysis
        prefix = f"{result.dag_id}/" if many else ""
        indent = "    " if many else "  "
        if many:
            lines.append(f"  subgraph {_quote(f'cluster_{index}')} {{")
            lines.append(f"    label={_quote(result.dag_id)};")
        source_id = _quote(prefix + INPUT_NODE)
        lines.append(f'{indent}{source_id} [shape=plaintext, style="", label="outside the DAG"];')
        for item in analysis.components:
            text = f"{item.name}\n{item.component.label_text}\n{item.verdict}"
            style = '"rounded,filled,dashed"' if not item.component.labelled else '"rounded,filled"'
            lines.append(f"{indent}{_quote(prefix + item.name)} [label={_quote(text)}, style={style}, "
                         f"fillcolor={_quote(COLOURS[status_of(item, analysis)])}];")
            for label, _kind, dashed in _inputs(item, result.source):
                extra = ", style=dashed" if dashed else ""
                lines.append(f"{indent}{source_id} -> {_quote(prefix + item.name)} [label={_quote(label)}{extra}];")
        for a, b, stream in analysis.edges:
            lines.append(f"{indent}{_quote(prefix + a)} -> {_quote(prefix + b)} [label={_quote(str(stream))}];")
        if many:
            lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _layers(result: DagAnalysis) -> dict[str, int]:
    """Column of each task: the longest path from the DAG's input (which sits in column 0)."""
    column: dict[str, int] = {}
    for item in result.analysis.components:  # topological order
        column[item.name] = 1 + max((column[u] for u in item.upstream), default=0)
    return column


def render_png(results: Sequence[DagAnalysis], path: str | Path) -> None:
    """Draw the DOT graph's content with matplotlib (no Graphviz needed): columns by depth, boxes
    coloured by status, stream labels on the edges.

    :raises ImportError: matplotlib is not installed.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    heights = []
    layouts = []
    for result in results:
        column = _layers(result)
        rows: dict[int, list[str]] = {}
        for name, col in column.items():
            rows.setdefault(col, []).append(name)
        tallest = max([len(v) for v in rows.values()] + [1])
        place = {INPUT_NODE: (0.0, (tallest - 1) / 2)}
        for col, names in rows.items():
            offset = (tallest - len(names)) / 2
            for i, name in enumerate(names):
                place[name] = (float(col), offset + i)
        layouts.append((result, place, max(column.values(), default=0) + 1))
        heights.append(tallest)
    width = max(cols for _, _, cols in layouts)
    longest = max((len(line) for r in results for item in r.analysis.components
                   for line in (item.name, item.component.label_text, item.verdict[:34])), default=10)
    box_w, box_h = max(2.1, 0.075 * longest + 0.3), 0.8
    step = box_w + 1.3
    inch = 0.62  # figure inches per data unit
    figure, axes = plt.subplots(len(results), 1, figsize=(width * step * inch + 0.5,
                                                          sum((1.4 * h + 1.2) * inch for h in heights) + 0.3),
                                squeeze=False, gridspec_kw={"height_ratios": [h + 0.9 for h in heights]})
    for ax, (result, place, _cols) in zip(axes[:, 0], layouts, strict=True):
        analysis = result.analysis

        def xy(name: str, place: dict[str, tuple[float, float]] = place) -> tuple[float, float]:
            col, row = place[name]
            return col * step, -row * 1.4

        def arrow(a: str, b: str, label: str, dashed: bool, xy: Any = xy, ax: Any = ax) -> None:
            (x0, y0), (x1, y1) = xy(a), xy(b)
            if dashed:  # external input: a short arrow from just above-left of the task
                x0, y0 = x1 - box_w / 2 - 0.9, y1 + box_h * 0.9
                ax.text(x0, y0, "outside", ha="right", va="center", fontsize=7, color="#555555")
                x0 -= box_w / 2
            ax.annotate("", xy=(x1 - box_w / 2, y1), xytext=(x0 + box_w / 2, y0),
                        arrowprops={"arrowstyle": "->", "color": "#555555", "lw": 1.0,
                                    "linestyle": "--" if dashed else "-"})
            ax.text((x0 + x1) / 2, (y0 + y1) / 2 + 0.12, label, ha="center", va="bottom", fontsize=7.5,
                    color="#1a4f8b", bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.9})

        x, y = xy(INPUT_NODE)
        ax.text(x, y, "outside\nthe DAG", ha="center", va="center", fontsize=8, color="#555555")
        for item in analysis.components:
            x, y = xy(item.name)
            ax.add_patch(FancyBboxPatch((x - box_w / 2, y - box_h / 2), box_w, box_h,
                                        boxstyle="round,pad=0.05", fc=COLOURS[status_of(item, analysis)],
                                        ec="#333333", lw=0.8, ls="--" if not item.component.labelled else "-"))
            verdict = item.verdict if len(item.verdict) <= 34 else item.verdict[:32] + "..."
            ax.text(x, y, f"{item.name}\n{item.component.label_text}\n{verdict}", ha="center", va="center",
                    fontsize=7)
            for label, _kind, dashed in _inputs(item, result.source):
                arrow(INPUT_NODE, item.name, label, dashed)
        for a, b, stream in analysis.edges:
            arrow(a, b, str(stream), False)
        ys = [xy(n)[1] for n in place]
        ax.set_xlim(-box_w / 2 - 0.3, (width - 1) * step + box_w / 2 + 0.3)  # the same scale for every DAG
        ax.set_ylim(min(ys) - box_h, max(ys) + box_h)
        ax.set_title(f"{result.dag_id}: dataflow output {analysis.output}", fontsize=9)
        ax.axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
