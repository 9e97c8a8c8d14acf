#!/usr/bin/env bash
# The package as a user installs it: build the wheel (`pip wheel . --no-deps`), install it with its
# dependencies into a fresh virtualenv outside the repository (nothing can resolve to the source
# tree), and run what the package registers from there: the `airflow-epochs` command, the provider in
# `airflow providers list` and the Epochs page in `airflow plugins`. Reuses pip's cache.
# Usage: bash scripts/wheel_check.sh   (CI runs it after the tests)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
say() { printf '[airflow-epochs] wheel check: %s\n' "$*"; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start=$SECONDS

say "building the wheel (pip wheel . --no-deps)"
# From a copy of what the wheel is made of, as in a fresh clone: setuptools builds in the source tree,
# and a build/ left there by an earlier build could put modules that no longer exist into the wheel.
mkdir "$work/src"
tar -C "$ROOT" --exclude=__pycache__ -cf - pyproject.toml README.md provider operators sensors | tar -C "$work/src" -xf -
"$PY" -m pip wheel --disable-pip-version-check --quiet --no-deps --wheel-dir "$work/dist" "$work/src"
wheel=("$work"/dist/airflow_provider_epochs-*.whl)
say "installing $(basename "${wheel[0]}") and its dependencies into a fresh virtualenv"
"$PY" -m venv "$work/venv"
if ! "$work/venv/bin/pip" install --disable-pip-version-check --quiet --no-compile "${wheel[0]}" >"$work/pip.log" 2>&1; then
  tail -n 30 "$work/pip.log"; say "install failed"; exit 1
fi

cd "$work"  # outside the repository: only the installed wheel can answer
export AIRFLOW_HOME="$work/airflow"
where="$("$work/venv/bin/python" -c 'import airflow_epochs; print(airflow_epochs.__file__)')"
case "$where" in
  "$work/venv/"*) ;;
  *) say "airflow_epochs imports from $where, not from the fresh virtualenv"; exit 1 ;;
esac
"$work/venv/bin/airflow-epochs" --help >"$work/help.txt"
grep -q "zookeeper" "$work/help.txt" || { cat "$work/help.txt"; say "airflow-epochs --help names no zookeeper command"; exit 1; }
"$work/venv/bin/airflow" providers list -o json >"$work/providers.json"
grep -q '"airflow-provider-epochs"' "$work/providers.json" || {
  tail -n 20 "$work/providers.json"; say "airflow providers list does not list airflow-provider-epochs"; exit 1; }
"$work/venv/bin/airflow" plugins -o json >"$work/plugins.json"
grep -q '"epochs"' "$work/plugins.json" || { cat "$work/plugins.json"; say "airflow plugins does not list epochs"; exit 1; }
say "passed in $((SECONDS - start)) s: airflow-epochs --help, airflow providers list and airflow plugins from the wheel"
