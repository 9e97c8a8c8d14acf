#!/usr/bin/env bash
# Looking at a pipeline from the command line (docs/guides/cli.rst); tests/integration/test_docs_examples.py runs it
# against a real ZooKeeper. Usage: bash look_at_a_pipeline.sh HOSTS PIPELINE OUT_DIR
set -euo pipefail
HOSTS="$1"
PIPELINE="$2"
OUT="$3"
# [START look_at_a_pipeline]
airflow-epochs status "$PIPELINE" --hosts "$HOSTS"             # frontier, leader, votes, seals, barriers
airflow-epochs history "$PIPELINE" --hosts "$HOSTS" --since 0  # recorded state changes after a cursor
airflow-epochs compact "$PIPELINE" --hosts "$HOSTS"            # apply retain_epochs now
airflow-epochs timeline "$PIPELINE" --hosts "$HOSTS" --out "$OUT/timeline.png" --out "$OUT/timeline.html"
# [END look_at_a_pipeline]
