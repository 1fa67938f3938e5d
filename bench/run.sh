#!/usr/bin/env bash
# Benchmark the ratelimit module: INCR/SET floor, every module command, the Lua scripts it
# replaces (bench/lua/*.lua) and redis-cell, in one run. See bench/README.md.
#
#   bench/run.sh            full run (3 runs per figure, ~15 minutes)
#   bench/run.sh --quick    one short run per figure (under 2 minutes)
#
# Environment:
#   RL_MODULE=path          the module to load (default: target/release/libredis_ratelimit.so)
#   RL_BENCH_NO_MODULE=1    run without the module (Lua scripts, INCR and redis-cell only)
#   RL_BENCH_NO_CELL=1      do not build or measure redis-cell
#   REDIS_CELL_SO=path      use this redis-cell module instead of building one
#
# It installs nothing: it says what is missing and how to get it. Building redis-cell
# (a crate from crates.io, into ~/.cache/redis-ratelimit/redis-cell, never into this
# repository) is announced when it happens; RL_BENCH_NO_CELL=1 skips it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"

missing=0
need() { # need <command> <how to get it>
	if ! command -v "$1" >/dev/null 2>&1; then
		echo "missing: $1 — $2" >&2
		missing=1
	fi
}
need redis-server "run \`make deps\` (Debian/Ubuntu: apt-get install redis-server)"
need redis-cli "run \`make deps\` (it comes with redis-server; Debian: redis-tools)"
need redis-benchmark "run \`make deps\` (it comes with redis-server; Debian: redis-tools)"
need python3 "install Python 3.8 or newer (only its standard library is used)"
command -v taskset >/dev/null 2>&1 ||
	echo "note: taskset not found (util-linux): server and client will not be pinned to cores" >&2

module="${RL_MODULE:-$root/target/release/libredis_ratelimit.so}"
if [[ "${RL_BENCH_NO_MODULE:-0}" == 1 ]]; then
	module=""
	echo "note: RL_BENCH_NO_MODULE=1: the module's commands are skipped" >&2
elif [[ ! -f "$module" ]]; then
	echo "missing: $module — run \`make release\` (or set RL_MODULE=path, or RL_BENCH_NO_MODULE=1 to measure without it)" >&2
	missing=1
fi
[[ $missing == 0 ]] || exit 1
# The servers run in their own directories, so the module's path must be absolute.
[[ -z "$module" ]] || module="$(cd "$(dirname "$module")" && pwd)/$(basename "$module")"

workdir="$(mktemp -d "${TMPDIR:-/tmp}/rl-bench.XXXXXX")"
mkdir -p "$workdir/pids"

# Stop any server this run started (by the pid it recorded), whatever way we leave.
child=""
cleanup() {
	local f pid
	if [[ -n "$child" ]] && kill -0 "$child" 2>/dev/null; then
		kill -TERM "$child" 2>/dev/null || true # bench.py stops its servers on SIGTERM
		wait "$child" 2>/dev/null || true
	fi
	for f in "$workdir"/pids/*.pid; do
		[[ -f "$f" ]] || continue
		pid="$(cat "$f")"
		if [[ -n "$pid" ]] && grep -qa redis-server "/proc/$pid/cmdline" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
		fi
	done
	rm -rf "$workdir"
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT
trap 'exit 143' TERM

cmdline="bench/run.sh${*:+ $*}"
# In the background so that a signal reaches the traps at once (bash runs a trap only after
# its foreground command ends); `wait` returns as soon as a trapped signal arrives.
python3 "$here/bench.py" --workdir "$workdir" --module "$module" --cmdline "$cmdline" "$@" &
child=$!
status=0
wait "$child" || status=$?
child=""
exit "$status"
