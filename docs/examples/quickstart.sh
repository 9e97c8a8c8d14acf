# The commands of the quickstart "Into your own Airflow 3" (docs/quickstart/own_airflow.rst), one step
# between each pair of [START name] / [END name] markers. The page includes every step from here, and
# tests/system/test_docs_quickstart.py runs every step in this order in bash, from the root of a
# clone of the repository, the `env` step first each time (as a reader's terminal keeps its exports),
# and the `airflow` step in the background (the page's second terminal). Not meant to run as a
# whole: the `airflow` step keeps running until the `stop` step.

# [START env]
export QUICKSTART="${QUICKSTART:-$HOME/epochs-quickstart}"
export AIRFLOW_HOME="$QUICKSTART/airflow"  # a new Airflow home (or keep yours)
export AIRFLOW_EPOCHS_HOME="$QUICKSTART/epochs"  # the embedded ZooKeeper's files
export ZK_PORT="${ZK_PORT:-2181}" AIRFLOW_PORT="${AIRFLOW_PORT:-8080}"
# Airflow's API server on loopback only, and where the task runners find it
export AIRFLOW__API__HOST=127.0.0.1 AIRFLOW__API__PORT="$AIRFLOW_PORT"
export AIRFLOW__API__BASE_URL="http://127.0.0.1:$AIRFLOW_PORT"
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="$AIRFLOW__API__BASE_URL/execution/"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
# [END env]

# [START install]
python3 -m venv "$QUICKSTART/venv"
source "$QUICKSTART/venv/bin/activate"
pip wheel . --no-deps --wheel-dir "$QUICKSTART/dist"  # in your clone's root
pip install "$QUICKSTART"/dist/airflow_provider_epochs-*.whl
airflow providers list | grep airflow-provider-epochs
# [END install]

# [START zookeeper]
airflow-epochs zookeeper start --port "$ZK_PORT"
airflow-epochs zookeeper status
# [END zookeeper]

# [START connection]
airflow db migrate
airflow connections add zookeeper_default --conn-type zookeeper \
    --conn-host "127.0.0.1:$ZK_PORT"
# [END connection]

# [START connection_ensemble]
# An ensemble of your own: its hosts, digest credentials and TLS, with a client
# certificate where the servers ask for one (ZK_HOSTS, ZK_USER, ZK_PASSWORD, ZK_CA,
# ZK_CERT and ZK_KEY are yours to set)
airflow connections add zookeeper_ensemble --conn-type zookeeper \
    --conn-host "$ZK_HOSTS" --conn-login "$ZK_USER" --conn-password "$ZK_PASSWORD" \
    --conn-extra "{\"use_tls\": true, \"ca\": \"$ZK_CA\",
                   \"certfile\": \"$ZK_CERT\", \"keyfile\": \"$ZK_KEY\"}"
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
