#!/usr/bin/env bash
# Copy the script backend (lua/ratelimit.lua, the one source) into the client packages that ship
# it. Each package has a test that its copy equals lua/ratelimit.lua byte for byte, so an edit of
# the script without this copy fails the tests instead of forking the script.
#
# usage: scripts/sync-lua.sh          (then commit the copies)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src="$root/lua/ratelimit.lua"
for dest in \
  "$root/clients/python/src/redis_ratelimit_client/ratelimit.lua" \
  "$root/clients/go/ratelimit.lua" \
  "$root/clients/node/lib/ratelimit.lua"; do
  if [ -d "$(dirname "$dest")" ]; then
    cp "$src" "$dest"
    echo "sync-lua: $src -> ${dest#"$root"/}"
  fi
done
