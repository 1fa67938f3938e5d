#!/usr/bin/env bash
# Run the example HTTP services (examples/python, examples/node, examples/gateway) against a real
# server with the module, installing what they need first and saying what:
#
#   Python: redis==8.1.0 (redis-py) and hatchling from PyPI, into the virtualenv
#           $RL_EXAMPLES_VENV (default ~/.cache/redis-ratelimit/examples), then the client
#           package with `pip install ./clients/python`
#   Node:   node and npm from apt (Debian's nodejs and npm packages) when missing, then
#           ioredis 6.0.0 and express 5.2.1 from the npm registry and the client package
#           (clients/node, linked) into examples/node/node_modules (npm ci, from the committed
#           package-lock.json)
#
# usage: RL_MODULE=path/to/libredis_ratelimit.so [RL_SERVER=redis-server] scripts/examples.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
VENV=${RL_EXAMPLES_VENV:-$HOME/.cache/redis-ratelimit/examples}
PY=${PYTHON:-python3}
PY_PACKAGES=(redis==8.1.0 hatchling==1.33.0)

NAME=examples
. "$root/scripts/lib.sh"

[ -n "${RL_MODULE:-}" ] || die "RL_MODULE must name the module .so (make test-examples sets it)"

# Python side.
stamp="$VENV/.installed"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${PY_PACKAGES[*]}" ]; then
  say "installing ${PY_PACKAGES[*]} from PyPI into $VENV"
  mkdir -p "$(dirname "$VENV")"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" ||
    die "could not create a virtualenv with $PY (on Debian: apt-get install python3-venv)"
  "$VENV/bin/pip" install -q --disable-pip-version-check --retries 2 --timeout 30 \
    "${PY_PACKAGES[@]}" || die "pip install ${PY_PACKAGES[*]} failed (is PyPI reachable?)"
  echo "${PY_PACKAGES[*]}" >"$stamp"
fi
"$VENV/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps \
  --no-build-isolation "$root/clients/python" || die "pip install ./clients/python failed"

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
node_dir="$root/examples/node"
if [ ! -f "$node_dir/node_modules/ioredis/package.json" ] ||
  [ ! -f "$node_dir/node_modules/express/package.json" ] ||
  [ ! -e "$node_dir/node_modules/redis-ratelimit-client/package.json" ] ||
  [ "$node_dir/package-lock.json" -nt "$node_dir/node_modules/.package-lock.json" ]; then
  say "installing ioredis and express from the npm registry and clients/node into examples/node/node_modules (npm ci)"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error) ||
    die "npm ci failed (is the npm registry reachable?)"
fi

say "$("$VENV/bin/python" -c 'import redis; print("redis-py", redis.__version__)'), node $(node --version)," \
  "ioredis $(node -p 'require(process.argv[1]).version' "$node_dir/node_modules/ioredis/package.json")," \
  "server $(LD_LIBRARY_PATH=${RL_LD_LIBRARY_PATH:-} "${RL_SERVER:-redis-server}" --version | awk '{print $3}')"
exec "$VENV/bin/python" "$root/examples/test_examples.py"
