#!/usr/bin/env bash
# The rearming client (provider/triggers/rearming_client.py) against several kazoo releases.
#
# RearmingKazooClient extends kazoo through private seams (_call, _reset_watchers, _session_callback's
# use of it, the _data_watchers/_child_watchers tables), so the pin in pyproject.toml allows only the
# releases checked here. For each version given (default: every release the pin allows and the newest
# one on the registry), kazoo==VERSION is installed alone into a throwaway folder outside the checkout
# and put first on PYTHONPATH in front of .venv; the rearming client's tests and the trigger tests
# that use it then run against it (ZooKeeper servers are started by the tests, as always).
# Usage: bash scripts/kazoo_matrix.sh [VERSION ...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"
tests=(tests/integration/test_rearm_watches.py tests/integration/test_triggers.py)
if [ "$#" -eq 0 ]; then
  # what the registry has, newest first (pip's own client: one look-up for the one package we test)
  available="$(pip index versions kazoo 2>/dev/null | sed -n 's/^Available versions: //p' | tr -d ' ' | tr ',' '\n')"
  [ -n "$available" ] || { say "could not list kazoo's releases (pip index versions kazoo)"; exit 2; }
  pin="$(python - <<'EOF'
import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(next(d for d in deps if d.replace(" ", "").startswith("kazoo")))
EOF
)"
  mapfile -t versions < <(PIN="$pin" python - "$available" <<'EOF'
import os, sys
from packaging.requirements import Requirement
from packaging.version import Version
pin = Requirement(os.environ["PIN"]).specifier
found = sorted({Version(v) for v in sys.argv[1].split() if v and not Version(v).is_prerelease})
chosen = [v for v in found if v in pin] + [found[-1]]
print("\n".join(dict.fromkeys(str(v) for v in chosen)))
EOF
)
  say "kazoo releases on the registry: $(echo $available); the pin is '$pin'"
else
  versions=("$@")
fi
say "testing kazoo ${versions[*]} with ${tests[*]}"
work="$(mktemp -d "${TMPDIR:-/tmp}/kazoo-matrix.XXXXXX")"
trap 'rm -rf "$work"' EXIT
failed=()
for version in "${versions[@]}"; do
  target="$work/kazoo-$version"
  if ! pip install --disable-pip-version-check --quiet --no-deps --target "$target" "kazoo==$version" \
      >"$work/pip-$version.log" 2>&1; then
    cat "$work/pip-$version.log"; failed+=("$version (install)"); continue
  fi
  got="$(cd "$work" && PYTHONPATH="$target" python -c 'import kazoo.version; print(kazoo.version.__version__)')"
  [ "$got" = "$version" ] || { say "kazoo $version installed but $got is imported"; failed+=("$version (import)"); continue; }
  say "kazoo $version: pytest ${tests[*]}"
  started=$SECONDS
  if PYTHONPATH="$target" pytest -q -n 0 "${tests[@]}" >"$work/pytest-$version.log" 2>&1; then
    say "kazoo $version: $(tail -n 1 "$work/pytest-$version.log") ($((SECONDS - started)) s)"
  else
    tail -n 40 "$work/pytest-$version.log"
    say "kazoo $version: FAILED ($((SECONDS - started)) s)"
    failed+=("$version")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  say "failed with kazoo ${failed[*]}"
  exit 1
fi
say "the rearming client's tests pass with kazoo ${versions[*]}"
