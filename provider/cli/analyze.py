"""``airflow-epochs analyze``: the Blazes coordination analysis of a DAG, as a table, JSON, DOT or PNG."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from airflow_epochs.cli.state import CliError

ANALYZE_FORMATS = ("table", "json", "dot", "png")


def cmd_analyze(args: argparse.Namespace) -> int:
    """Exit 0 when every order-sensitive task is sealed or ordered, 1 on under-coordination."""
    if args.format == "png" and not args.out:
        raise CliError("--format png needs --out FILE")
    from airflow_epochs.analysis import analyse_target
    from airflow_epochs.analysis.report import (
        find_bench_file,
        render_dot,
        render_json,
        render_png,
        render_table,
        sealing_figure,
    )

    results = [r for target in args.targets for r in analyse_target(target, dags_folder=args.dags_folder)]
    if args.bench:
        bench: Path | None = Path(args.bench)
    else:
        bench = find_bench_file([Path.cwd(), *(Path(r.fileloc).parent for r in results if r.fileloc)])
    figure = sealing_figure(bench)
    text = None
    try:
        if args.format == "png":
            render_png(results, args.out)
        elif args.format == "json":
            text = json.dumps(render_json(results, figure), indent=2) + "\n"
        elif args.format == "dot":
            text = render_dot(results)
        else:
            text = render_table(results, figure)
        if text is not None and args.out:
            Path(args.out).write_text(text)
    except ImportError:
        raise CliError("--format png needs matplotlib (pip install 'airflow-provider-epochs[examples]')") from None
    except OSError as exc:
        raise CliError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    if text is not None and not args.out:
        sys.stdout.write(text)
    under = [f for r in results for f in r.analysis.under]
    for finding in under:
        print(f"under-coordination: task {finding.component!r}: missing {finding.missing}", file=sys.stderr)
    if args.out:
        over = sum(len(r.analysis.over) for r in results)
        print(f"{args.format} written to {args.out}: {len(results)} DAG(s), {len(under)} under-coordinated "
              f"path(s), {over} over-coordination warning(s)")
    return 1 if under else 0


def add_analyze_command(sub: Any) -> None:
    analyze = sub.add_parser("analyze", help="Blazes coordination analysis of a DAG: which tasks need a seal, an "
                             "order or nothing (exit 1 on under-coordination)")
    analyze.add_argument("targets", nargs="+", metavar="DAG_FILE_OR_ID",
                         help="a DAG file or folder, or a DAG id in the DAGs folder (several allowed)")
    analyze.add_argument("--format", choices=ANALYZE_FORMATS, default="table", help="output format (default table)")
    analyze.add_argument("--out", help="write the report to FILE (required for png)")
    analyze.add_argument("--bench", help="benchmark results whose sealing figure warnings cite (default: the "
                         "nearest .epochs/bench.json)")
    analyze.add_argument("--dags-folder", help="where to look a DAG id up (default: Airflow's dags_folder)")
    analyze.set_defaults(func=cmd_analyze)
