#!/usr/bin/env bash
# The system packages the tests need beyond Python and Java, from Debian's archive: PostgreSQL (the
# scheduler-driven tests and the Epochs page's browser test run Airflow on a real PostgreSQL server,
# started by the tests), chromium (the browser test drives it through Playwright, never a
# downloaded browser), a JDK's javac (the Spark RPC attack test builds its attacker) and Redis (the Celery
# broker of scripts/cluster.sh and its system test). Installs only what is missing, through sudo when not root; does nothing when
# both are there. Run by .ci/run and scripts/test.sh.
set -euo pipefail

epochs_system_deps() {
  local missing=()
  ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  # the Celery broker of scripts/cluster.sh and its system test
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  # javac builds the Spark RPC attacker of the security tests (a JRE alone has none)
  command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
  [ "${#missing[@]}" -eq 0 ] && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    printf '[airflow-epochs] the tests need %s and this machine has no apt-get: install them by hand\n' \
      "${missing[*]}" >&2
    return 2
  fi
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  printf '[airflow-epochs] installing %s (apt-get)\n' "${missing[*]}"
  # through env: sudo drops the caller's environment
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

epochs_system_deps
