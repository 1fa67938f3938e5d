#!/usr/bin/env bash
# Check and test the Envoy rate limit service (rls/) against a real server with the module and
# against envoyproxy/ratelimit itself, installing what is missing first and saying what:
#
#   Go:        `go` on PATH at version GO_MIN or newer; when missing or older, Go GO_VERSION from
#              the Go module proxy (the module golang.org/toolchain) into $RL_CACHE/go-toolchain
#   staticcheck STATICCHECK_VERSION, with `go install` from the Go module proxy into $RL_CACHE/go-tools
#   envoyproxy/ratelimit at UPSTREAM_VERSION, with `go install .../src/service_cmd@UPSTREAM_VERSION`
#              from the Go module proxy into $RL_CACHE/envoy-ratelimit/UPSTREAM_VERSION
#   Go modules of rls/go.mod (go-redis, grpc, go-control-plane's envoy protos and xDS server,
#              yaml.v3), by go itself; the project's Go client from clients/go (a replace directive)
#
# Then: gofmt, go vet, staticcheck, and `go test` of rls/ (unit tests; side-by-side tests of both
# services on one redis-server with the module; a load run of RLS_LOAD_SECONDS (3) per service at
# RLS_LOAD_RPS (3000) requests per second, written to $RL_CACHE/rls-load.txt).
#
# usage: RL_MODULE=path/to/libredis_ratelimit.so [RL_SERVER=redis-server] scripts/rls.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
RL_CACHE=${RL_CACHE:-$HOME/.cache/redis-ratelimit}
GO_MIN=1.21           # the first release that fetches the toolchain rls/go.mod asks for by itself
GO_VERSION=1.26.8
STATICCHECK_VERSION=v0.8.2
UPSTREAM_VERSION=v1.4.1-0.20260122083618-3fb702589d36   # envoyproxy/ratelimit main, 2026-01-22
GOPROXY_URL=${GOPROXY_URL:-https://proxy.golang.org}

NAME=rls
. "$root/scripts/lib.sh"

[ -n "${RL_MODULE:-}" ] || die "RL_MODULE must name the module .so (make test-rls sets it)"
RL_MODULE=$(readlink -f "$RL_MODULE")
export RL_MODULE RL_SERVER=${RL_SERVER:-redis-server}

go_ok() {
  command -v go >/dev/null 2>&1 || return 1
  local v
  v=$(go env GOVERSION 2>/dev/null | sed 's/^go//') || return 1
  [ "$(printf '%s\n%s\n' "$GO_MIN" "$v" | sort -V | head -1)" = "$GO_MIN" ]
}

if ! go_ok && [ -x "$RL_CACHE/go-toolchain/bin/go" ]; then
  export PATH="$RL_CACHE/go-toolchain/bin:$PATH"
fi
if ! go_ok; then
  say "installing Go $GO_VERSION from the Go module proxy (golang.org/toolchain) into $RL_CACHE/go-toolchain"
  command -v curl >/dev/null 2>&1 || die "curl is needed to fetch Go (apt-get install curl)"
  tmp=$(mktemp -d)
  zip="$tmp/go.zip"
  curl -fsSL --retry 2 -o "$zip" \
    "$GOPROXY_URL/golang.org/toolchain/@v/v0.0.1-go$GO_VERSION.linux-$(dpkg --print-architecture 2>/dev/null || echo amd64).zip" ||
    die "could not download Go $GO_VERSION from $GOPROXY_URL"
  python3 -m zipfile -e "$zip" "$tmp/x" || die "could not unpack Go"
  rm -rf "$RL_CACHE/go-toolchain"
  mkdir -p "$RL_CACHE"
  mv "$tmp"/x/golang.org/toolchain@*/ "$RL_CACHE/go-toolchain"
  chmod -R +x "$RL_CACHE/go-toolchain/bin" "$RL_CACHE/go-toolchain/pkg/tool"
  rm -rf "$tmp"
  export PATH="$RL_CACHE/go-toolchain/bin:$PATH"
  go_ok || die "Go from $RL_CACHE/go-toolchain does not run"
fi
say "$(go version)"

tools="$RL_CACHE/go-tools"
if [ ! -x "$tools/$STATICCHECK_VERSION/staticcheck" ]; then
  say "installing staticcheck $STATICCHECK_VERSION from the Go module proxy into $tools/$STATICCHECK_VERSION"
  (cd "$root/rls" && GOBIN="$tools/$STATICCHECK_VERSION" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION") ||
    die "go install staticcheck failed"
fi

upstream="$RL_CACHE/envoy-ratelimit/$UPSTREAM_VERSION/service_cmd"
if [ ! -x "$upstream" ]; then
  say "building envoyproxy/ratelimit $UPSTREAM_VERSION from the Go module proxy into $(dirname "$upstream")"
  (cd /tmp && GOBIN="$(dirname "$upstream")" \
    go install "github.com/envoyproxy/ratelimit/src/service_cmd@$UPSTREAM_VERSION") ||
    die "go install github.com/envoyproxy/ratelimit/src/service_cmd@$UPSTREAM_VERSION failed"
fi
export RLS_UPSTREAM=$upstream

cd "$root/rls"
say "gofmt"
bad=$(gofmt -l .)
[ -z "$bad" ] || die "gofmt would change: $bad (run gofmt -w rls)"
say "go vet"
go vet ./...
say "staticcheck"
"$tools/$STATICCHECK_VERSION/staticcheck" ./...

say "go test (unit, side by side with envoyproxy/ratelimit, load) on $("$RL_SERVER" --version | cut -d' ' -f3)"
export RLS_REQUIRE=1 RLS_LOAD_SECONDS=${RLS_LOAD_SECONDS:-3} RLS_LOAD_OUT=$RL_CACHE/rls-load.txt
go test -count=1 -p 1 -timeout 5m ./... -v 2>&1 | tee "$RL_CACHE/rls-test.log" |
  grep -E '^(--- |ok|FAIL|PASS|panic)|load:|service |ours |envoyproxy/ratelimit ' || true
pass=$(grep -c '^--- PASS' "$RL_CACHE/rls-test.log" || true)
fail=$(grep -cE '^--- FAIL|^FAIL|^panic' "$RL_CACHE/rls-test.log" || true)
skip=$(grep -c '^--- SKIP' "$RL_CACHE/rls-test.log" || true)
say "$pass passed, $fail failed, $skip skipped (log: $RL_CACHE/rls-test.log)"
[ "$fail" -eq 0 ] && [ "$skip" -eq 0 ] && [ "$pass" -gt 0 ] || die "tests failed"
