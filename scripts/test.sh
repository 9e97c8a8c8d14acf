#!/usr/bin/env bash
# The test suite, with lint and type checks, on a real ZooKeeper, Spark and Airflow started by the tests.
# Usage: bash scripts/test.sh [pytest arguments]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
# PostgreSQL and chromium for the scheduler-driven and browser tests (apt, only what is missing).
bash "$ROOT/scripts/system_deps.sh"
say "ruff check"
ruff check provider operators sensors dags tests scripts bench
say "mypy --strict on the whole airflow_epochs package"
python "$ROOT/scripts/typecheck.py"
say "pytest"
exec pytest "$@"
