#!/usr/bin/env bash
# The test suite, with lint and type checks, on a real ZooKeeper, Spark and Airflow started by the tests.
# Usage: bash scripts/test.sh [--unit] [pytest arguments]
#   --unit   ruff, mypy and the unit tier only (tests/unit: no server of any kind; about a minute)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
unit=0
if [ "${1:-}" = "--unit" ]; then unit=1; shift; fi
if [ "$unit" = 0 ]; then
  # PostgreSQL and chromium for the scheduler-driven and browser tests (apt, only what is missing).
  bash "$ROOT/scripts/system_deps.sh"
fi
say "ruff check"
ruff check provider operators sensors dags tests scripts bench
say "mypy --strict on the whole airflow_epochs package"
python "$ROOT/scripts/typecheck.py"
# Test files are spread over worker processes (pytest-xdist), a whole file per worker so its module
# fixtures start once, the long files first (tests/conftest.py orders them; --no-loadscope-reorder
# keeps that order). Much of a test's time is spent waiting on servers it started, so three workers
# gain even on two cores (the whole tier, 1,438 tests: 2,635 s on three against about 2,700 on two, the
# three under another 6 to 10 of load). EPOCHS_TEST_WORKERS=0 runs everything in this process; a "-n"
# among the arguments wins over this one.
workers="${EPOCHS_TEST_WORKERS:-3}"
if [ "$unit" = 1 ]; then
  say "pytest: the unit tier on $workers workers"
  exec pytest -n "$workers" tests/unit "$@"
fi
say "pytest on $workers workers"
# The 25 slowest tests are listed at the end: where a long run's minutes went.
exec pytest -n "$workers" --dist loadfile --no-loadscope-reorder --durations=25 "$@"
