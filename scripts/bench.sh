#!/usr/bin/env bash
# The coordination benchmarks, each beside its peer in the same run. Usage: bash scripts/bench.sh [--smoke]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
exec "$VENV/bin/python" "$ROOT/bench/run.py" --out "$STATE/bench.json" "$@"
