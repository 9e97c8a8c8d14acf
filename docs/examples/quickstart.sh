# The commands of the quickstart "Into your own Airflow 3" (docs/quickstart/own_airflow.rst), one step
# between each pair of [START name] / [END name] markers. The page includes every step from here, and
# tests/system/test_docs_quickstart.py runs every step in this order in bash, from the root of a
# clone of the repository, the `env` step first each time (as a reader's terminal keeps its exports),
# and the `airflow` step in the background (the page's second terminal). Not meant to run as a
# whole: the `airflow` step keeps running until the `stop` step.

# [START env]
umask 077  # what this terminal writes is yours alone (a home folder is often 0755, umask 022)
export QUICKSTART="${QUICKSTART:-$HOME/epochs-quickstart}"
mkdir -p "$QUICKSTART" && chmod 0700 "$QUICKSTART"
export AIRFLOW_HOME="$QUICKSTART/airflow"  # a new Airflow home (or keep yours)
export AIRFLOW_EPOCHS_HOME="$QUICKSTART/epochs"  # the embedded ZooKeeper's files
export ZK_PORT="${ZK_PORT:-2181}" AIRFLOW_PORT="${AIRFLOW_PORT:-8080}"
# Airflow's API server on loopback only, and where the task runners find it
export AIRFLOW__API__HOST=127.0.0.1 AIRFLOW__API__PORT="$AIRFLOW_PORT"
export AIRFLOW__API__BASE_URL="http://127.0.0.1:$AIRFLOW_PORT"
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="$AIRFLOW__API__BASE_URL/execution/"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
# a task's calls to the API server wait 120 s (the server's own limit), not 5: on a busy host
# the first try of a task otherwise fails with httpx.ReadTimeout
export AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT=120
# [END env]

# [START get]
git clone "$EPOCHS_REPO" "$QUICKSTART/airflow-provider-epochs"  # the repository's address
cd "$QUICKSTART/airflow-provider-epochs"
# [END get]

# [START install]
python3 -m venv "$QUICKSTART/venv"
source "$QUICKSTART/venv/bin/activate"
export AIRFLOW_VERSION=3.3.2 PYTHON_VERSION="$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
export AIRFLOW_CONSTRAINTS="${AIRFLOW_CONSTRAINTS:-https://raw.githubusercontent.com/apache/airflow/constraints-$AIRFLOW_VERSION/constraints-$PYTHON_VERSION.txt}"
pip install "apache-airflow==$AIRFLOW_VERSION" --constraint "$AIRFLOW_CONSTRAINTS"
pip wheel . --no-deps --wheel-dir "$QUICKSTART/dist"  # in your clone's root
pip install "$QUICKSTART"/dist/airflow_provider_epochs-*.whl "apache-airflow==$AIRFLOW_VERSION"
# the Spark provider's pyspark-client overwrites PySpark's Python files: put PySpark's back
pip install --force-reinstall --no-deps "pyspark==$(pip show pyspark | sed -n 's/^Version: //p')"
python -c 'import pyspark; print("pyspark", pyspark.__version__)'
airflow providers list | grep airflow-provider-epochs
# [END install]

# [START zookeeper]
airflow-epochs zookeeper start --port "$ZK_PORT"
airflow-epochs zookeeper status
# [END zookeeper]

# [START zookeeper_values]
airflow-epochs zookeeper values
# [END zookeeper_values]

# [START connection]
airflow db migrate
airflow connections add zookeeper_default --conn-type zookeeper \
    --conn-host "127.0.0.1:$ZK_PORT"
# [END connection]

# [START connection_ensemble]
# OPTIONAL, only with an ensemble of your own (skip it for the embedded server): its
# hosts, digest user, CA and client certificate, and the password read without echo
: "${ZK_HOSTS:?set ZK_HOSTS, ZK_USER, ZK_CA, ZK_CERT and ZK_KEY first (this block is for an ensemble of your own)}"
export ZK_HOSTS ZK_USER ZK_CA ZK_CERT ZK_KEY  # e.g. ZK_HOSTS=zk1:2181,zk2:2181,zk3:2181
[ -n "${ZK_PASSWORD:-}" ] || read -rsp "ZooKeeper password of ${ZK_USER:-?}: " ZK_PASSWORD
export ZK_PASSWORD
# the password goes through a 0600 file (umask 077), never a command's arguments
python - > "$QUICKSTART/zookeeper_ensemble.json" <<'PY'
import json, os, sys
names = ("ZK_HOSTS", "ZK_USER", "ZK_PASSWORD", "ZK_CA", "ZK_CERT", "ZK_KEY")
if missing := [n for n in names if not os.environ.get(n)]:
    sys.exit(f"set {', '.join(missing)} first: this block is for an ensemble of your own")
env = {n: os.environ[n] for n in names}
print(json.dumps({"zookeeper_ensemble": {
    "conn_type": "zookeeper", "host": env["ZK_HOSTS"], "login": env["ZK_USER"],
    "password": env["ZK_PASSWORD"], "extra": {"use_tls": True, "ca": env["ZK_CA"],
                                              "certfile": env["ZK_CERT"], "keyfile": env["ZK_KEY"]}}}))
PY
airflow connections import "$QUICKSTART/zookeeper_ensemble.json"
rm "$QUICKSTART/zookeeper_ensemble.json"
# [END connection_ensemble]

# [START dag]
mkdir -p "$AIRFLOW_HOME/dags"
cp docs/examples/quickstart_dag.py "$AIRFLOW_HOME/dags/"
airflow dags reserialize
airflow dags unpause quickstart_epochs
# [END dag]

# [START airflow]
cd "$QUICKSTART"
airflow api-server --host 127.0.0.1 --port "$AIRFLOW_PORT" > api-server.log 2>&1 &
echo $! > airflow.pids
# tasks report to the API server: start the scheduler once it answers
until curl -sf "$AIRFLOW__API__BASE_URL/api/v2/monitor/health" > /dev/null; do
    sleep 2
done
airflow dag-processor > dag-processor.log 2>&1 &
echo $! >> airflow.pids
airflow scheduler --skip-serve-logs > scheduler.log 2>&1 &
echo $! >> airflow.pids
airflow triggerer --skip-serve-logs > triggerer.log 2>&1 &
echo $! >> airflow.pids
wait
# [END airflow]

# [START runs]
airflow dags list-runs quickstart_epochs
# [END runs]

# [START status]
airflow-epochs status quickstart --recent 3
# [END status]

# [START status_ensemble]
airflow-epochs status quickstart --conn-id zookeeper_ensemble
# [END status_ensemble]

# [START login]
cat "$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated"
# [END login]

# [START stop]
kill $(cat "$QUICKSTART/airflow.pids")
airflow-epochs zookeeper stop
# [END stop]
