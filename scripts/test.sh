#!/usr/bin/env bash
# The test suite, with lint and type checks, on a real ZooKeeper, Spark and Airflow started by the tests.
# Usage: bash scripts/test.sh [pytest arguments]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
say "ruff check"
ruff check provider operators sensors dags tests scripts bench
say "mypy --strict on the coordination core, the Spark job contract, Iceberg publishing and lineage"
# mypy cannot follow setuptools' editable finder (provider/ installs as airflow_epochs): give it the
# package under its real name through a link.
mkdir -p .epochs/typecheck && ln -sfn ../../provider .epochs/typecheck/airflow_epochs
MYPYPATH=.epochs/typecheck mypy --strict -p airflow_epochs.coordination -p airflow_epochs.spark -p airflow_epochs.tables \
  -p airflow_epochs.lineage
say "pytest"
exec pytest "$@"
