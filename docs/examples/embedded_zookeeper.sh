#!/usr/bin/env bash
# The embedded ZooKeeper from the command line (docs/guides/connections.rst); tests/integration/test_docs_examples.py
# runs it with AIRFLOW_EPOCHS_HOME set to a folder of its own.
set -euo pipefail
# [START embedded_zookeeper]
airflow-epochs zookeeper start    # detached; data and pid under ~/.airflow-epochs ($AIRFLOW_EPOCHS_HOME)
airflow-epochs zookeeper status
airflow-epochs zookeeper stop
# [END embedded_zookeeper]
