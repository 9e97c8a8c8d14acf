#!/usr/bin/env bash
# The main job on the production topology, every component its own processes on loopback: a 3-node
# ZooKeeper ensemble (TLS, digest), a Spark standalone master, two workers and a Spark Connect server
# (spark.authenticate, UIs behind a signed token), PostgreSQL and Redis (passwords), Airflow's API
# server, DAG processor, two schedulers, two triggerers and two Celery workers. State in .epochs/cluster.
# Usage: bash scripts/cluster.sh up [--days N] [--connect-only]  start (in the background, supervised)
#        bash scripts/cluster.sh run [--faults] [--no-compare]   catch-up over the days, check, report
#        bash scripts/cluster.sh faults      kill -9 each component in turn during a run, start a 2nd deployment
#        bash scripts/cluster.sh status | down
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
bash "$ROOT/scripts/system_deps.sh"
if [ "${1:-}" = "up" ]; then
  base="$ROOT/.epochs/cluster"
  umask 077  # the folder and the supervisor's log are ours alone from their first byte
  mkdir -p "$base" && chmod 700 "$base"
  rm -f "$base/state-celery.json"
  # The supervisor outlives this shell: 'down' stops it and everything it started.
  setsid "$VENV/bin/python" "$ROOT/scripts/cluster.py" "$@" >"$base/supervisor.log" 2>&1 </dev/null &
  pid=$!
  while [ ! -s "$base/state-celery.json" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then cat "$base/supervisor.log"; exit 1; fi
    sleep 2
  done
  cat "$base/supervisor.log"
  exit 0
fi
exec "$VENV/bin/python" "$ROOT/scripts/cluster.py" "$@"
