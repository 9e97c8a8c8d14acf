# Sourced by demo.sh and test.sh: make sure .venv exists and holds this project and its dependencies.
# Idempotent: a stamp of pyproject.toml's hash skips the install when nothing changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STATE="$ROOT/.epochs"
# Ours alone (its logs and stamps are no one else's business; the state folders below check their own modes).
mkdir -p -m 700 "$STATE"
if [ -O "$STATE" ] && [ ! -L "$STATE" ]; then chmod 700 "$STATE"; fi
say() { printf '[airflow-epochs] %s\n' "$*"; }

command -v java >/dev/null 2>&1 || [ -n "${JAVA_HOME:-}" ] || {
  say "Java is missing: the embedded ZooKeeper and Spark need it (apt-get install -y openjdk-17-jre-headless)"; exit 2; }

PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtualenv .venv with $($PY --version 2>&1)"
  "$PY" -m venv "$VENV"
fi

stamp="$STATE/install.stamp"
want="$(cat "$ROOT/pyproject.toml" "$ROOT/scripts/bootstrap.sh" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing airflow-provider-epochs and its dependencies into .venv (a few minutes the first time; log: .epochs/pip.log)"
  if ! "$VENV/bin/pip" install --disable-pip-version-check -e "$ROOT[dev]" >"$STATE/pip.log" 2>&1; then
    tail -n 30 "$STATE/pip.log"; say "install failed; see .epochs/pip.log"; exit 2
  fi
  # The Spark provider pulls pyspark-client, whose files overwrite pyspark's own in the same folder
  # (pyspark.__version__ then disagrees with the jars, and pip check sees nothing): put pyspark back.
  jars="$("$VENV/bin/pip" show pyspark 2>/dev/null | sed -n 's/^Version: //p')"
  code="$("$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null || true)"
  if [ -n "$jars" ] && [ "$jars" != "$code" ]; then
    say "pyspark files say $code but the wheel is $jars (pyspark-client overwrote them): reinstalling pyspark $jars"
    "$VENV/bin/pip" install --disable-pip-version-check --force-reinstall --no-deps "pyspark==$jars" >>"$STATE/pip.log" 2>&1
  fi
  echo "$want" >"$stamp"
else
  say "dependencies up to date in .venv"
fi
export PATH="$VENV/bin:$PATH"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
