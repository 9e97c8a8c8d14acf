#!/usr/bin/env bash
# The documentation: builds docs/ into docs/_build/html with Sphinx. Warnings are errors (-W, reported all
# at once by --keep-going) and every cross-reference must resolve (-n); -E rereads every page, so a
# warning of an unchanged page is never hidden by an earlier build. Nothing is fetched from the network:
# the theme and extensions are the `docs` extra's packages, intersphinx is off.
# Usage: bash scripts/docs.sh [sphinx-build arguments]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
# autodoc imports the operators, which import Airflow: give it a throwaway home (Airflow writes its
# config there on import), never the user's ~/airflow.
AIRFLOW_HOME="$(mktemp -d)"
export AIRFLOW_HOME
trap 'rm -rf "$AIRFLOW_HOME"' EXIT
say "sphinx-build docs -> docs/_build/html"
sphinx-build -E -W --keep-going -n -q -b html "$@" docs docs/_build/html
