#!/usr/bin/env bash
# Instructions per call, counted by valgrind's callgrind inside redis-server: a figure that does
# not move with the machine's load, unlike requests per second. For each command it starts a
# server under callgrind, warms up 1,000 keys, then counts every instruction the server runs
# (network, parsing, the command, the reply) over N calls at pipeline 16 and divides by N.
# The `hot` rows use one key instead: INCR, XADD (the floor of an append to a stream) and
# RL.STREAMCOUNT with a one-hour window (an append per call), their ratio to `INCR hot`.
# The second table does the same with a replica attached to the counted master (the replica, a
# plain redis-server with the module, is not counted): the cost of propagation.
#
# usage: bench/instructions.sh [N]        (default 20000 calls per command; about 8 minutes)
#   RL_INSTR_ONLY=regex   only the labels matching it (e.g. 'INCR|RL.GCRA')
#   RL_INSTR_KEEP=dir     keep each callgrind output there (for callgrind_annotate)
#   RL_INSTR_REPLICA=0    skip the with-replica table (=only: only that table)
# The row `INCR, module not loaded` counts INCR on a server without the module (nor the floor
# module): against the `INCR` row, what loading the module costs a command it does not own
# (SPEC: nothing, within noise).
# The row `API floor` is bench/floor/floor.c (built here with cc): the module API calls of a
# granted RL.GCRA call and nothing else, so RL.GCRA's count minus its count is the module's own
# work; the rows `API floor (RL.GCRA <option>)` are the same for RL.GCRA with that option. They
# are skipped when cc or the redis-module crate's redismodule.h is missing.
# needs: valgrind (apt), redis-server and redis-benchmark (make deps), the release module (make release)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
MODULE=${RL_MODULE:-$PWD/target/release/libredis_ratelimit.so}
ONLY=${RL_INSTR_ONLY:-}
KEEP=${RL_INSTR_KEEP:-}
REPLICA=${RL_INSTR_REPLICA:-1}
for tool in valgrind callgrind_control redis-server redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "instructions: $tool is missing (apt-get install valgrind; make deps)"; exit 1; }
done
[ -f "$MODULE" ] || { echo "instructions: $MODULE is missing (make release)"; exit 1; }
[ -n "$KEEP" ] && mkdir -p "$KEEP"

work=$(mktemp -d)
pid=""
rpid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  [ -n "$rpid" ] && kill "$rpid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The floor module, built against the redismodule.h the module itself is built with.
floor=()
# (For this platform only: a dependency used on other platforms alone is not downloaded.)
include=$(cargo metadata --offline --format-version 1 \
  --filter-platform "$(rustc -vV | sed -n 's/^host: //p')" 2>/dev/null | python3 -c '
import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "redis-module":
        print(os.path.join(os.path.dirname(p["manifest_path"]), "src", "include"))
        break' 2>/dev/null || true)
# Offline without every dev-dependency downloaded, cargo metadata fails: the locked version's
# sources in cargo's registry then.
if [ ! -f "$include/redismodule.h" ]; then
  version=$(grep -A1 '^name = "redis-module"$' Cargo.lock | sed -n 's/^version = "\(.*\)"$/\1/p')
  for dir in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/redis-module-"$version"/src/include; do
    [ -f "$dir/redismodule.h" ] && include=$dir
  done
fi
if command -v cc >/dev/null && [ -f "$include/redismodule.h" ] \
  && cc -O2 -shared -fPIC -I"$include" -o "$work/floor.so" bench/floor/floor.c; then
  floor=(--loadmodule "$work/floor.so")
else
  echo "instructions: no API floor row (needs cc and the redis-module crate's redismodule.h)" >&2
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# count LABEL [SCRIPT] -- ARGS...: instructions per call of ARGS (EVALSHA of SCRIPT when given),
# with a replica attached when $with_replica is 1, on servers that load the modules unless
# $bare is 1
bare=0
prep=""
count() {
  local label=$1 script=$2; shift 3
  if [ -n "$ONLY" ] && ! [[ $label =~ $ONLY ]]; then return; fi
  local modules=(--loadmodule "$MODULE" "${floor[@]}")
  [ "$bare" = 1 ] && modules=()
  local port; port=$(free_port)
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/cg.%p" \
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
    "${modules[@]}" >"$work/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
  # $prep: a command the row needs first (RL.LIMIT's policy); a replica gets it by replication.
  # shellcheck disable=SC2086
  [ -n "$prep" ] && redis-cli -p "$port" $prep >/dev/null
  local rport=""
  if [ "$with_replica" = 1 ]; then
    rport=$(free_port)
    mkdir -p "$work/replica"
    redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work/replica" \
      "${modules[@]}" --replicaof 127.0.0.1 "$port" >"$work/replica.log" 2>&1 &
    rpid=$!
    for _ in $(seq 600); do
      redis-cli -p "$rport" INFO replication 2>/dev/null | grep -q 'master_link_status:up' && break
      sleep 0.1
    done
  fi
  local cmd=("$@")
  if [ -n "$script" ]; then
    local sha; sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$script")")
    cmd=(EVALSHA "$sha" 1 "$@")
  fi
  local bench=(redis-benchmark -p "$port" -P 16 -r 1000 -q)
  "${bench[@]}" -n 2000 "${cmd[@]}" >/dev/null
  callgrind_control -i on "$pid" >/dev/null 2>&1
  "${bench[@]}" -n 2000 "${cmd[@]}" >/dev/null
  callgrind_control -z "$pid" >/dev/null 2>&1
  "${bench[@]}" -n "$N" "${cmd[@]}" >/dev/null
  callgrind_control -i off "$pid" >/dev/null 2>&1
  callgrind_control -d "$pid" >/dev/null 2>&1
  if [ -n "$rport" ]; then
    redis-cli -p "$rport" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait "$rpid" 2>/dev/null || true
    rpid=""
    rm -rf "$work/replica"
  fi
  redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  pid=""
  local out; out=$(ls "$work"/cg.*.1)
  local total; total=$(grep -h '^totals:' "$out" | awk '{print $2}')
  if [ -n "$KEEP" ]; then
    local suffix=""; [ "$with_replica" = 1 ] && suffix=".replica"
    cp "$out" "$KEEP/$(echo "$label" | tr -c 'A-Za-z0-9.\n' '_')$suffix.callgrind"
  fi
  rm -f "$work"/cg.*
  local per=$((total / N))
  case $label in INCR | "INCR hot") incr=$per ;; esac
  printf '| %s | %s | %s |\n' "$label" "$per" "$(awk -v a="$incr" -v b="$per" 'BEGIN { printf "%.2f", a / b }')"
}

table() {
  incr=1
  local K='k:__rand_int__'
  count "INCR" "" -- INCR "$K"
  bare=1 count "INCR, module not loaded" "" -- INCR "$K"
  count "RL.GCRA" "" -- RL.GCRA "$K" 10000000 1 1m
  prep="RL.POLICY SET bench GCRA 10000000 1 1m" count "RL.LIMIT (one-limiter GCRA policy)" "" -- RL.LIMIT "$K" bench
  [ ${#floor[@]} -gt 0 ] && count "API floor (RL.GCRA's API calls only)" "" -- FLOOR.GCRA "$K" 10000000 1 1m
  count "CL.THROTTLE" "" -- CL.THROTTLE "$K" 9999999 1 60
  count "RL.TOKENBUCKET" "" -- RL.TOKENBUCKET "$K" 10000000 1 1m
  count "RL.LEAKYBUCKET" "" -- RL.LEAKYBUCKET "$K" 10000000 1 1m
  count "RL.FIXED" "" -- RL.FIXED "$K" 10000000 1m
  count "RL.FIXED month TZ Europe/Paris" "" -- RL.FIXED "$K" 10000000 month TZ Europe/Paris
  count "RL.SLIDINGCOUNTER" "" -- RL.SLIDINGCOUNTER "$K" 10000000 1m
  count "RL.SLIDING" "" -- RL.SLIDING "$K" 10000000 1000
  count "RL.ALL (GCRA + TOKENBUCKET CHARGE 100)" "" -- RL.ALL 2 "$K:a" "$K:b" GCRA 10000000 1 1m NAME rpm TOKENBUCKET 10000000 1 1m CHARGE 100 NAME tpm
  # RL.ALL against the calls it replaces (issue 29: one limiter <= 1.05x its own command; each
  # further limiter <= 4,000; the gateway <= 26,000, <= 32,000 with a replica).
  local G=(GCRA 10000000 1 1m)
  count "RL.ALL 1 key (GCRA)" "" -- RL.ALL 1 "$K" "${G[@]}"
  count "RL.ALL 2 keys (GCRA x2)" "" -- RL.ALL 2 "$K:a" "$K:b" "${G[@]}" "${G[@]}"
  count "RL.ALL 3 keys (GCRA x3)" "" -- RL.ALL 3 "$K:a" "$K:b" "$K:c" "${G[@]}" "${G[@]}" "${G[@]}"
  count "RL.ALL 3 keys, the gateway" "" -- RL.ALL 3 "$K:a" "$K:b" "$K:c" GCRA 10000000 1 1m NAME rpm \
    TOKENBUCKET 10000000 1 1m CHARGE 100 NAME tpm FIXED 100000000 month TZ Europe/Paris CHARGE 100 NAME budget
  prep="RL.POLICY SET gw GCRA 10000000 1 1m NAME rpm TOKENBUCKET 10000000 1 1m CHARGE 100 NAME tpm FIXED 100000000 month TZ Europe/Paris CHARGE 100 NAME budget" \
    count "RL.ALL 3 keys POLICY gw (the gateway as a policy)" "" -- RL.ALL 3 "$K:a" "$K:b" "$K:c" POLICY gw
  [ ${#floor[@]} -gt 0 ] && count "API floor, 3 keys (RL.ALL 3 keys' API calls only)" "" -- FLOOR.ALL 3 "$K:a" "$K:b" "$K:c"
  # The same floors given RL.ALL's whole request (the limiters are read by Redis, not by the
  # floor): what Redis alone spends on that call, against which RL.ALL's own work is measured.
  if [ ${#floor[@]} -gt 0 ]; then
    count "API floor, RL.ALL 1 key's request" "" -- FLOOR.ALL 1 "$K" "${G[@]}"
    count "API floor, RL.ALL 3 keys (GCRA x3)'s request" "" -- FLOOR.ALL 3 "$K:a" "$K:b" "$K:c" "${G[@]}" "${G[@]}" "${G[@]}"
    count "API floor, the gateway's request" "" -- FLOOR.ALL 3 "$K:a" "$K:b" "$K:c" GCRA 10000000 1 1m NAME rpm \
      TOKENBUCKET 10000000 1 1m CHARGE 100 NAME tpm FIXED 100000000 month TZ Europe/Paris CHARGE 100 NAME budget
  fi
  # The shared options over the plain RL.GCRA call (DETAIL <= +15%, DEDUP <= +20%,
  # HOLD .. DEDUP <= +30%, SHADOW and DELAY <= +5%), each followed by its API floor: the same
  # request to bench/floor, which makes the API calls the option needs and nothing else (its
  # tokens read by Redis, DETAIL's reply, DEDUP's propagation as the command with AT), so that
  # the option's own work is its row minus its floor, and its floor minus `API floor (RL.GCRA's
  # API calls only)` what Redis alone spends on the option.
  local O=("$K" 10000000 1 1m)
  count "RL.GCRA DETAIL" "" -- RL.GCRA "${O[@]}" DETAIL
  # DEDUP: a new id on most calls (1,000 ids over 1,000 keys), remembered by the key.
  count "RL.GCRA DEDUP id" "" -- RL.GCRA "${O[@]}" DEDUP "id:__rand_int__"
  count "RL.GCRA HOLD 30s DEDUP id" "" -- RL.GCRA "${O[@]}" HOLD 30s DEDUP "id:__rand_int__"
  count "RL.GCRA SHADOW" "" -- RL.GCRA "${O[@]}" SHADOW
  count "RL.GCRA DELAY 1s" "" -- RL.GCRA "${O[@]}" DELAY 1s
  if [ ${#floor[@]} -gt 0 ]; then
    count "API floor (RL.GCRA DETAIL)" "" -- FLOOR.DETAIL "${O[@]}" DETAIL
    count "API floor (RL.GCRA DEDUP id)" "" -- FLOOR.DEDUP "${O[@]}" DEDUP "id:__rand_int__"
    count "API floor (RL.GCRA HOLD 30s DEDUP id)" "" -- FLOOR.DEDUP "${O[@]}" HOLD 30s DEDUP "id:__rand_int__"
    count "API floor (RL.GCRA SHADOW)" "" -- FLOOR.GCRA "${O[@]}" SHADOW
    count "API floor (RL.GCRA DELAY 1s)" "" -- FLOOR.GCRA "${O[@]}" DELAY 1s
  fi
  count "RL.ACQUIRE (renewing its lease)" "" -- RL.ACQUIRE "$K" 65536 1m ID a
  count "RL.ACQUIRE WAIT (renewing its lease)" "" -- RL.ACQUIRE "$K" 65536 1m ID a WAIT 1s
  count "RL.GCRA denied" "" -- RL.GCRA "$K" 1 1 1h
  count "RL.SLIDING denied" "" -- RL.SLIDING "$K" 1 1h
  # One hot key: an append to one stream per call (XADD, the floor of an append), against INCR.
  count "INCR hot" "" -- INCR hot
  count "XADD hot" "" -- XADD hot '*' count 1
  count "RL.STREAMCOUNT hot 1h" "" -- RL.STREAMCOUNT hot 1h
  if [ "$with_replica" = 0 ]; then
    count "Lua GCRA (redis_rate)" bench/lua/gcra.lua -- "$K" 10000000 1 60
    count "Lua token bucket" bench/lua/token_bucket.lua -- "$K" 10000000 1 60000
    count "Lua fixed window" bench/lua/fixed_window.lua -- "$K" 10000000 60000
    count "Lua sorted-set log" bench/lua/sorted_set_log.lua -- "$K" 10000000 1000
  fi
}

header="| command | instructions per call | ×INCR (INCR's count / this one's) |"
echo "Instructions per call in redis-server (callgrind), $N calls at pipeline 16 over 1,000 keys"
echo "(rows \`hot\`: one key, ×INCR against \`INCR hot\`);"
echo "$(redis-server --version | cut -d' ' -f1-3). Reproduce: bench/instructions.sh $N"
if [ "$REPLICA" != only ]; then
  echo
  echo "Without a replica:"
  echo
  echo "$header"
  echo "|---|--:|--:|"
  with_replica=0
  table
fi
if [ "$REPLICA" != 0 ]; then
  echo
  echo "With a replica attached to the counted master:"
  echo
  echo "$header"
  echo "|---|--:|--:|"
  with_replica=1
  table
fi
