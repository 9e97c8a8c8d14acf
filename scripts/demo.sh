#!/usr/bin/env bash
# The main job: the demo pipeline on an embedded ZooKeeper, run as real Airflow DAG runs.
# Usage: bash scripts/demo.sh [--epochs N] [--clean]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
exec "$VENV/bin/python" "$ROOT/scripts/demo.py" "$@"
