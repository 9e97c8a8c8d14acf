#!/usr/bin/env bash
# The main job: the nycflights13 epoch pipeline as real Airflow DAG runs, on an embedded ZooKeeper
# and a warm Spark Connect server, both started here.
# Usage: bash scripts/demo.sh [--days N | --all] [--clean] [--serve [--port P]] [--correct DAY [--correct-feed F]]
# --serve: the same days under Airflow's real scheduler, with the UI (and its Epochs page) kept serving.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
exec "$VENV/bin/python" "$ROOT/scripts/demo.py" "$@"
