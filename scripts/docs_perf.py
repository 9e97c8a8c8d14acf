"""The performance page's tables, generated from a bench JSON file (never typed by hand).

    python scripts/docs_perf.py           # docs/_data/bench.json -> docs/_generated/performance_tables.inc
    python scripts/docs_perf.py --check   # exit 1 if the committed tables are not the script's output

After a full ``bash scripts/bench.sh``, copy its ``.epochs/bench.json`` over ``docs/_data/bench.json`` (the
committed snapshot of the last run) and run the script; both files are committed together.

The input is what ``bench/run.py`` writes: ``machine``, ``date``, ``rows`` (each with its stable ``id``,
``group``, ``measure``, ``ours``, ``peer``, ``unit``, ``peer_name``, ``better``, ``note`` and ``extra``).
One table per group, in the groups' order of ``bench/run.py``: ours beside the peer of the same run, and
how many times better ours is (``peer / ours`` when lower is better, ``ours / peer`` when higher is).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BENCH = ROOT / "docs" / "_data" / "bench.json"
# .inc, not .rst: Sphinx reads it only through the page's include, never as a page of its own
DEFAULT_OUT = ROOT / "docs" / "_generated" / "performance_tables.inc"
# bench/run.py's GROUPS, in its order, with a title for each table
GROUPS = {
    "wake": "Waking on a seal", "scheduler": "Under a real scheduler", "barrier": "Barriers",
    "waiters": "Many waiters", "sealing": "Sealing throughput", "cost": "Cost of an epoch",
    "open": "Opening an epoch", "growth": "Bounded state", "capacity": "Capacity",
    "reconnect": "Failover", "spark": "Spark epochs", "ui": "The Epochs page", "publish": "Iceberg publishing",
    "producers": "Declared producers",
}
UNITS_AFTER = {"ms", "s", "MB", "GB", "KB", "%"}  # written after the number; others are words ("3 requests")


class BenchFileError(ValueError):
    """The bench JSON file is not one ``bench/run.py`` writes (names what is wrong)."""


def number(value: float | None) -> str:
    """A figure as bench/run.py prints it: 3 significant digits, thousands separated."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    text = f"{value:.3g}"
    return f"{float(text):,.0f}" if "e" in text else text


def with_unit(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{number(value)} {unit}" if unit else number(value)


def advantage(row: Mapping[str, Any]) -> float | None:
    """How many times better ours is, from the row's own figures (None without a peer)."""
    ours, peer, better = row.get("ours"), row.get("peer"), row.get("better", "lower")
    if not ours or not peer or better == "none":
        return None
    return float(peer) / float(ours) if better == "lower" else float(ours) / float(peer)


def ratio(row: Mapping[str, Any]) -> str:
    adv = advantage(row)
    if adv is None:
        return "-"
    return f"{adv:,.0f}x" if adv >= 100 else f"{adv:.1f}x" if adv >= 10 else f"{adv:.2f}x"


def cell(text: str) -> str:
    """A list-table cell: one line, and nothing rst would read as markup."""
    flat = " ".join(str(text).split())
    flat = flat.replace("\\", "\\\\").replace("*", "\\*").replace("`", "\\`").replace("|", "\\|")
    return re.sub(r"(?<=\w)_(?=\W|$)", r"\\_", flat) or "-"  # name_ would be a link target


def load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BenchFileError(f"{path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise BenchFileError(f"{path}: not a bench/run.py result (no 'rows' list)")
    if not isinstance(data.get("machine"), dict):
        raise BenchFileError(f"{path}: no 'machine' object")
    if not isinstance(data.get("date"), str) or not data["date"]:
        raise BenchFileError(f"{path}: no 'date' (when the run finished)")
    seen: set[str] = set()
    for i, row in enumerate(data["rows"]):
        if not isinstance(row, dict):
            raise BenchFileError(f"{path}: row {i} is not an object")
        for key in ("id", "group", "measure", "unit"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise BenchFileError(f"{path}: row {i} has no {key!r}")
        if row["id"] in seen:
            raise BenchFileError(f"{path}: row id {row['id']!r} appears twice")
        seen.add(row["id"])
        if row["group"] not in GROUPS:
            raise BenchFileError(f"{path}: row {row['id']!r} has an unknown group {row['group']!r}")
        for key in ("ours", "peer"):
            if row.get(key) is not None and not isinstance(row[key], (int, float)):
                raise BenchFileError(f"{path}: row {row['id']!r}: {key} is not a number: {row[key]!r}")
    return data


def machine_line(machine: Mapping[str, Any]) -> str:
    order = ("cores", "python", "kazoo", "zookeeper", "pyspark", "airflow", "platform", "mode")
    keys = [k for k in order if k in machine] + sorted(k for k in machine if k not in order and k != "groups")
    return "; ".join(f"{k} {machine[k]}" for k in keys)


def table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    out = [".. list-table::", "   :header-rows: 1", "   :widths: 20 32 14 22 12", "",
           "   * - id", "     - measure", "     - ours", "     - peer (same run)", "     - ours is"]
    for row in rows:
        peer_name = row.get("peer_name") or "-"
        peer = "-" if row.get("peer") is None else f"{peer_name}: {with_unit(row['peer'], row['unit'])}"
        measure = row["measure"]
        notes = [n for n in ((row.get("extra") or {}).get("run"), row.get("note")) if n]
        if notes:
            measure += f" ({'; '.join(str(n) for n in notes)})"
        out += [f"   * - ``{row['id']}``", f"     - {cell(measure)}",
                f"     - {cell(with_unit(row.get('ours'), row['unit']))}", f"     - {cell(peer)}",
                f"     - {cell(ratio(row))}"]
    return out


def render(data: Mapping[str, Any], source: str) -> str:
    """The rst include: the run's date and machine, then one table per group with rows."""
    lines = [f".. Generated by scripts/docs_perf.py from {source}: do not edit; run the script.", "",
             f"**Run**: {cell(data['date'])}. **Machine**: {cell(machine_line(data['machine']))}."]
    failed = data.get("failed") or {}
    if failed:  # bench/run.py keeps the other groups' rows when one fails: say which are missing
        lines += ["", "**Groups that failed in this run** (their rows are missing): "
                  + cell("; ".join(f"{name}: {error}" for name, error in sorted(failed.items()))) + "."]
    if data.get("source"):
        lines += ["", f"**Source**: {cell(str(data['source']).rstrip('.'))}."]
    for group, title in GROUPS.items():
        rows = [r for r in data["rows"] if r["group"] == group]
        if not rows:
            continue
        lines += ["", title, "~" * len(title), "", *table(rows)]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH, help="bench JSON file (default: the snapshot)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the rst include to write")
    parser.add_argument("--check", action="store_true", help="only compare with --out; exit 1 if it differs")
    args = parser.parse_args(argv)
    try:
        data = load(args.bench)
    except BenchFileError as exc:
        print(f"docs_perf: {exc}", file=sys.stderr)
        return 2
    try:
        source = args.bench.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        source = args.bench.name
    text = render(data, source)
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current != text:
            print(f"docs_perf: {args.out} is not what {source} gives: run python scripts/docs_perf.py",
                  file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out} ({sum(1 for _ in data['rows'])} rows from {source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
