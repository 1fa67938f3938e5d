#!/usr/bin/env bash
# Test the Debian package on this machine: install it (dpkg -i, as root), start Debian's
# redis-server on a free loopback port with a configuration that includes the packaged snippet
# (/etc/redis/ratelimit.conf, which loads /usr/lib/redis/modules/libredis_ratelimit.so), check
# MODULE LIST, INFO ratelimit and a few commands, run the smoke suite (tests/smoke.rs) on the
# packaged module, then stop the server (by its pid) and purge the package.
#
# usage: scripts/test-deb.sh      (make test-deb; needs root or sudo)
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=test-deb
. scripts/lib.sh

VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
IFS=. read -r MAJOR MINOR PATCH <<<"$VERSION"
DEB=dist/redis-ratelimit_${VERSION}-1_amd64.deb
SO=/usr/lib/redis/modules/libredis_ratelimit.so
SERVER=${REDIS_SERVER:-/usr/bin/redis-server}
[ -f "$DEB" ] || die "no $DEB: run make deb first"

dir=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  as_root dpkg --purge redis-ratelimit >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

say "dpkg -i $DEB"
as_root dpkg -i "$DEB" >/dev/null
[ -f "$SO" ] || die "$SO was not installed"
[ -f /etc/redis/ratelimit.conf ] || die "/etc/redis/ratelimit.conf was not installed"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$dir/redis.conf" <<CONF
bind 127.0.0.1
port $port
dir $dir
save ""
logfile $dir/server.log
include /etc/redis/ratelimit.conf
CONF
"$SERVER" "$dir/redis.conf" &
pid=$!
for _ in $(seq 100); do
  [ "$(redis-cli -p "$port" PING 2>/dev/null)" = PONG ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$dir/server.log" >&2; die "the server did not start"; }
  sleep 0.1
done
cli() { redis-cli -p "$port" "$@"; }
check() { # what, got, want
  [ "$2" = "$3" ] || die "$1: got '$2', want '$3'"
  say "ok: $1 = $3"
}
check "MODULE LIST path" "$(cli MODULE LIST | sed -n '/^path$/{n;p}')" "$SO"
check "MODULE LIST ver" "$(cli MODULE LIST | sed -n '/^ver$/{n;p}')" "$((MAJOR * 10000 + MINOR * 100 + PATCH))"
check "INFO ratelimit" "$(cli INFO ratelimit | tr -d '\r' | sed -n 's/^ratelimit_version://p')" "$VERSION"
check "RL.GCRA k 10 1 1s" "$(cli RL.GCRA k 10 1 1s | tr '\n' ' ')" "1 10 9 0 1000 "
check "TYPE k" "$(cli TYPE k)" "ratelimit"
check "RL.FIXED f 2 1h COST 2" "$(cli RL.FIXED f 2 1h COST 2 | head -3 | tr '\n' ' ')" "2 2 0 "
check "CONFIG GET ratelimit.dedup-max" "$(cli CONFIG GET ratelimit.dedup-max | tail -1)" "1000"
kill "$pid"
wait "$pid" 2>/dev/null || true
pid=

say "the smoke suite on $SO (Debian's redis-server)"
RL_MODULE=$SO RL_SERVER=$SERVER RL_LD_LIBRARY_PATH= cargo test --quiet --test smoke -- --test-threads=2

say "dpkg --purge redis-ratelimit"
as_root dpkg --purge redis-ratelimit >/dev/null
[ ! -e "$SO" ] || die "$SO is still there after purge"
[ ! -e /etc/redis/ratelimit.conf ] || die "/etc/redis/ratelimit.conf is still there after purge"
say "installed, loaded by Debian's redis-server, smoke-tested and removed"
