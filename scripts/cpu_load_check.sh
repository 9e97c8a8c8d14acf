#!/usr/bin/env bash
# The scheduler-driven system tests under CPU load: every core is kept busy by other processes (one
# busy loop per core) while the tests run N times (default 3) under the real scheduler and
# triggerers. They are the tests whose timing depends on the machine (Airflow's defer race on a busy
# worker, triggerer take-over after a crash); each run starts its own deployments. Several minutes
# per run; not part of scripts/test.sh or CI (run it by hand).
# Usage: bash scripts/cpu_load_check.sh [runs] [pytest arguments (default: the scheduler test files)]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
runs="${1:-3}"
shift || true
tests=("$@")
[ "${#tests[@]}" -gt 0 ] || tests=(tests/system/test_scheduler.py tests/system/test_declared_scheduler.py)
cores="$(nproc)"
busy=()
stop_busy() { [ "${#busy[@]}" -eq 0 ] || kill "${busy[@]}" 2>/dev/null || true; }
trap stop_busy EXIT
for _ in $(seq "$cores"); do
  "$VENV/bin/python" -c 'while True: pass' &
  busy+=("$!")
done
say "$cores busy loops started (pids ${busy[*]}); running ${tests[*]} $runs times"
passed=0
for run in $(seq "$runs"); do
  started=$SECONDS
  temp="$STATE/cpu-load-run-$run"
  rm -rf "$temp"
  if pytest -q -n 0 --basetemp "$temp" "${tests[@]}" >"$temp.log" 2>&1; then
    passed=$((passed + 1)); verdict=passed
  else
    verdict="FAILED (log: .epochs/cpu-load-run-$run.log)"
  fi
  # What the defer race did in this run: tasks Airflow marked failed behind a stale executor event,
  # and the retries that took over.
  races="$(cat "$temp"/*/scheduler*.log 2>/dev/null | grep -c "finished with state success, but the task instance's state attribute is" || true)"
  retries="$(find "$temp" -path '*dag_id=*' -name 'attempt=[2-9]*.log' ! -name '*trigger*' 2>/dev/null | wc -l)"
  say "run $run: $verdict in $((SECONDS - started)) s ($(tail -n 1 "$temp.log")); defer races seen by the scheduler: $races; retried tries: $retries"
done
say "$passed of $runs runs passed with every core busy"
[ "$passed" -eq "$runs" ]
