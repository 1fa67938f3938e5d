#!/usr/bin/env bash
# Lint, type-check and test the client packages (clients/python, clients/node) against a real
# server with the module, installing what they need first and saying what:
#
#   Python: the packages of PY_PACKAGES from PyPI (httpx2 for FastAPI's TestClient, asgiref for
#           Flask's async views among them) into the virtualenv $RL_CLIENTS_VENV (default
#           ~/.cache/redis-ratelimit/clients), hatchling among them, then clients/python itself
#           with `pip install ./clients/python` (hatchling from the venv, no build isolation)
#   Node:   node and npm from apt when missing, then clients/node's devDependencies (ioredis,
#           redis, express, express-rate-limit, typescript) from the npm registry with `npm ci`
#           from the committed package-lock.json
#
# Then runs ruff, mypy --strict and pytest on the Python package, tsc --noEmit and node --test on
# the Node package, and prints one line per step and "clients: N passed, N failed".
#
# usage: RL_MODULE=path/to/libredis_ratelimit.so [RL_SERVER=redis-server] scripts/clients.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
VENV=${RL_CLIENTS_VENV:-$HOME/.cache/redis-ratelimit/clients}
PY=${PYTHON:-python3}
PY_PACKAGES=(redis==8.1.0 pytest==9.2.0 ruff==0.17.5 mypy==2.4.1 fastapi==0.163.2 flask==3.1.3 hatchling==1.33.0
  httpx2==2.16.2 asgiref==3.13.0 prometheus-client==0.26.0 opentelemetry-sdk==1.45.2)
PIP=(--disable-pip-version-check --retries 2 --timeout 30 -q)

NAME=clients
. "$root/scripts/lib.sh"

[ -n "${RL_MODULE:-}" ] || die "RL_MODULE must name the module .so (make test-clients sets it)"
RL_MODULE=$(readlink -f "$RL_MODULE")
export RL_MODULE

# Python side.
stamp="$VENV/.installed"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${PY_PACKAGES[*]}" ]; then
  say "installing ${PY_PACKAGES[*]} from PyPI into $VENV"
  mkdir -p "$(dirname "$VENV")"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" ||
    die "could not create a virtualenv with $PY (on Debian: apt-get install python3-venv)"
  "$VENV/bin/pip" install "${PIP[@]}" "${PY_PACKAGES[@]}" ||
    die "pip install ${PY_PACKAGES[*]} failed (is PyPI reachable?)"
  echo "${PY_PACKAGES[*]}" >"$stamp"
fi
say "pip install ./clients/python"
start=$SECONDS
"$VENV/bin/pip" install "${PIP[@]}" --force-reinstall --no-deps --no-build-isolation "$root/clients/python" ||
  die "pip install ./clients/python failed"
say "installed ($((SECONDS - start)) s)"

# Node side.
missing=()
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get; install Node.js by hand"
  say "installing ${missing[*]} from apt"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -q
  as_root apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
node_dir="$root/clients/node"
if [ ! -f "$node_dir/node_modules/.package-lock.json" ] ||
  [ "$node_dir/package-lock.json" -nt "$node_dir/node_modules/.package-lock.json" ]; then
  say "installing clients/node's devDependencies from the npm registry (npm ci)"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error) ||
    die "npm ci failed (is the npm registry reachable?)"
fi

say "$("$VENV/bin/python" -c 'import redis; print("redis-py", redis.__version__)'), node $(node --version)," \
  "server $(LD_LIBRARY_PATH=${RL_LD_LIBRARY_PATH:-} "${RL_SERVER:-redis-server}" --version | awk '{print $3}')"

passed=0
failed=0
failures=()
step() {
  local what=$1
  shift
  local start=$SECONDS
  say "==> $what"
  if "$@"; then
    passed=$((passed + 1))
    say "ok   $what ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1))
    failures+=("$what")
    say "FAIL $what ($((SECONDS - start)) s)"
  fi
}

py_dir="$root/clients/python"
step "python: ruff check" bash -c "cd '$py_dir' && '$VENV/bin/ruff' check --no-cache src tests && '$VENV/bin/ruff' format --no-cache --check src tests"
step "python: mypy --strict" bash -c "cd '$py_dir' && '$VENV/bin/mypy' --strict --cache-dir='$VENV/mypy-cache'"
# Against the installed package (pip install ./clients/python), not the source tree.
step "python: pytest" bash -c "cd '$py_dir/tests' && '$VENV/bin/pytest' -q -p no:cacheprovider --rootdir=. -c /dev/null ."
step "node: tsc --noEmit" bash -c "cd '$node_dir' && node_modules/.bin/tsc --noEmit -p ."
step "node: node --test" bash -c "cd '$node_dir' && node --test --test-concurrency=1 test/*.test.js test/*.test.mjs"
# The script backend (lua/): differential tests against the module on every server without it.
step "lua: differential tests (scripts/lua.sh)" env PYTEST="$VENV/bin/pytest" "$root/scripts/lua.sh"

[ "$failed" -eq 0 ] || say "failed: ${failures[*]}"
echo "clients: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
