#!/usr/bin/env bash
# Check and test the Go client (clients/go) against a real server with the module, installing
# what it needs first and saying what:
#
#   Go:          the toolchain on PATH (or /usr/local/go/bin); when there is none, Debian's
#                golang-go from apt (Go >= 1.21 is needed)
#   modules:     go-redis v9 and, for the tests only, go-redis/redis_rate v10, from the Go module
#                proxy into the module cache (go mod download; checked against go.sum)
#   staticcheck: honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION with `go install`, cached
#                in ~/.cache/redis-ratelimit/go/bin (once per version)
#
# Then runs gofmt -l, go vet, staticcheck and `go test -race -count=1 ./...`: the tests start
# their own servers (RL_SERVER, module RL_MODULE) on free loopback ports, among them a local
# cluster of 3 masters and 3 replicas (redis-cli --cluster create), and stop them by pid.
#
# usage: RL_MODULE=path/to/libredis_ratelimit.so [RL_SERVER=redis-server] scripts/go.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
STATICCHECK_VERSION=${STATICCHECK_VERSION:-v0.8.2}
BIN=${RL_GO_BIN:-$HOME/.cache/redis-ratelimit/go/bin}

NAME=go
. "$root/scripts/lib.sh"

[ -n "${RL_MODULE:-}" ] || die "RL_MODULE must name the module .so (make test-go sets it)"
RL_MODULE=$(readlink -f "$RL_MODULE")
export RL_MODULE RL_SERVER=${RL_SERVER:-redis-server}

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null 2>&1; then
  say "no Go toolchain: installing golang-go from apt"
  as_root apt-get update -qq && as_root apt-get install -y -qq golang-go >/dev/null ||
    die "could not install golang-go (install Go >= 1.21 from https://go.dev/dl)"
fi
ver=$(go env GOVERSION)
minor=$(echo "$ver" | sed -E 's/^go1\.([0-9]+).*/\1/')
[ "${minor:-0}" -ge 21 ] 2>/dev/null || die "Go $ver is too old: clients/go needs Go >= 1.21"
command -v redis-cli >/dev/null 2>&1 || die "redis-cli is needed for the cluster tests (apt-get install redis-tools)"
[ "$(go env CGO_ENABLED)" = 1 ] && command -v "$(go env CC)" >/dev/null 2>&1 ||
  die "go test -race needs cgo and a C compiler ($(go env CC)); apt-get install gcc"

cd "$root/clients/go"
say "$ver; go mod download (go-redis v9, redis_rate v10 for the tests) from $(go env GOPROXY)"
go mod download
go mod verify >/dev/null || die "the module cache does not match go.sum"

sc="$BIN/staticcheck-$STATICCHECK_VERSION"
if [ ! -x "$sc" ]; then
  say "installing staticcheck $STATICCHECK_VERSION (honnef.co/go/tools) into $BIN"
  mkdir -p "$BIN"
  tmp=$(mktemp -d)
  GOBIN="$tmp" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" ||
    { rm -rf "$tmp"; die "go install staticcheck@$STATICCHECK_VERSION failed (is the Go module proxy reachable?)"; }
  mv "$tmp/staticcheck" "$sc"
  rm -rf "$tmp"
fi

say "gofmt -l"
bad=$(gofmt -l .)
[ -z "$bad" ] || die "not gofmt-formatted: $bad (run gofmt -w clients/go)"
say "go vet ./..."
go vet ./...
say "staticcheck ./..."
"$sc" ./...
say "go test -race ./... on $($RL_SERVER --version | head -c 60) with $RL_MODULE"
start=$SECONDS
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
go test -race -count=1 -v ./... >"$out" 2>&1 || status=$?
cat "$out"
awk '
  /^ *--- PASS/ {pass++} /^ *--- FAIL/ {fail++}
  /differential: / {sub(/^.*differential: /, ""); diff=$0}
  END {printf "go: %d passed, %d failed (tests, subtests and examples)\n", pass, fail; if (diff) print "go: differential: " diff}' "$out"
[ "$status" = 0 ] || die "go test failed"
say "go tests done ($((SECONDS - start)) s)"
