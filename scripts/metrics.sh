#!/usr/bin/env bash
# `make test-metrics`: the module's metrics through the real tools. Installs what is missing into
# $RL_METRICS_TOOLS (default ~/.cache/redis-ratelimit/metrics-tools) and says what:
#
#   Go:          when `go` (1.21 or later) is missing, the Go toolchain go1.23.12 from the Go module
#                proxy (golang.org/toolchain, checked against its go.sum hash) into go/
#   redis_exporter v1.62.0: built with `go build` from the Go module proxy, pinned by
#                monitoring/test/tools/exporter/go.mod and go.sum (every module's hash checked);
#                rebuilt when go.sum changes
#   promtool, prometheus: Debian's `prometheus` package (2.42), fetched with `apt-get download`
#                and unpacked into prometheus/ (not installed: no service is started)
#
# Then:
#   1. promtool check rules and promtool test rules on monitoring/prometheus/ (alert unit tests)
#   2. monitoring/test/check_dashboard.py: the Grafana dashboard's lint rules, each query parsed
#      by promtool
#   3. monitoring/test/scrape_test.py: redis-server with the module under a short load, the real
#      redis_exporter with --script monitoring/redis-ratelimit.lua, a real Prometheus with
#      monitoring/prometheus/scrape.yml and alerts.yml: series, labels and values against the
#      load, every dashboard query, every alert's expression
#
# usage: RL_MODULE=path/to/libredis_ratelimit.so [RL_SERVER=redis-server] scripts/metrics.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
TOOLS=${RL_METRICS_TOOLS:-$HOME/.cache/redis-ratelimit/metrics-tools}
SERVER=${RL_SERVER:-redis-server}
GO_TOOLCHAIN=go1.23.12
PROM_DEB=prometheus

NAME=metrics
. "$root/scripts/lib.sh"

[ -n "${RL_MODULE:-}" ] || die "RL_MODULE must name the module .so (make test-metrics sets it)"
RL_MODULE=$(readlink -f "$RL_MODULE")
command -v python3 >/dev/null || die "python3 is missing"
mkdir -p "$TOOLS/bin"

# --- Go: the one on PATH when it is 1.21 or later, else a toolchain from the module proxy.
go_ok() {
  local v
  v=$("$1" env GOVERSION 2>/dev/null) || return 1
  v=${v#go}
  [ "$(printf '%s\n%s\n' 1.21 "$v" | sort -V | head -1)" = 1.21 ]
}
GO=""
if command -v go >/dev/null 2>&1 && go_ok go; then
  GO=$(command -v go)
elif [ -x "$TOOLS/go/bin/go" ] && go_ok "$TOOLS/go/bin/go"; then
  GO=$TOOLS/go/bin/go
else
  arch=$(uname -m)
  case $arch in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
  ver="v0.0.1-$GO_TOOLCHAIN.linux-$arch"
  say "installing the Go toolchain $GO_TOOLCHAIN from the Go module proxy (golang.org/toolchain@$ver)"
  command -v curl >/dev/null || die "curl is missing"
  command -v unzip >/dev/null || python3 -c 'import zipfile' || die "unzip is missing"
  tmp=$(mktemp -d)
  curl -fsSL --retry 2 -o "$tmp/go.zip" "https://proxy.golang.org/golang.org/toolchain/@v/$ver.zip"
  rm -rf "$TOOLS/go"
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$tmp/go.zip" "$tmp/x"
  mv "$tmp/x/golang.org/toolchain@$ver" "$TOOLS/go"
  chmod +x "$TOOLS"/go/bin/* "$TOOLS"/go/pkg/tool/*/* 2>/dev/null || true
  rm -rf "$tmp"
  GO=$TOOLS/go/bin/go
  go_ok "$GO" || die "the Go toolchain from the module proxy does not run"
fi

# --- redis_exporter, built from the pinned module (go.sum checks every module's hash).
EXPORTER=$TOOLS/bin/redis_exporter
stamp=$(cat "$root/monitoring/test/tools/exporter/go.mod" "$root/monitoring/test/tools/exporter/go.sum" | sha256sum | cut -c1-16)
if [ ! -x "$EXPORTER" ] || [ "$(cat "$EXPORTER.stamp" 2>/dev/null)" != "$stamp" ]; then
  say "building redis_exporter $(sed -n 's/^require github.com\/oliver006\/redis_exporter //p' \
    "$root/monitoring/test/tools/exporter/go.mod") from the Go module proxy (into $EXPORTER)"
  (cd "$root/monitoring/test/tools/exporter" && GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
    nice "$GO" build -o "$EXPORTER" github.com/oliver006/redis_exporter)
  echo "$stamp" >"$EXPORTER.stamp"
fi

# --- promtool and prometheus: Debian's package, unpacked (no service, no root needed).
PROMTOOL=$TOOLS/prometheus/usr/bin/promtool
PROMETHEUS=$TOOLS/prometheus/usr/bin/prometheus
if [ ! -x "$PROMTOOL" ] || [ ! -x "$PROMETHEUS" ]; then
  command -v apt-get >/dev/null || die "no apt-get to fetch Debian's prometheus package (promtool)"
  say "fetching Debian's $PROM_DEB package with apt-get download (promtool, prometheus) into $TOOLS/prometheus"
  tmp=$(mktemp -d)
  chmod 755 "$tmp"
  if ! (cd "$tmp" && apt-get download -q "$PROM_DEB" >/dev/null 2>&1); then
    as_root apt-get update -q >/dev/null
    (cd "$tmp" && apt-get download -q "$PROM_DEB" >/dev/null)
  fi
  rm -rf "$TOOLS/prometheus"
  dpkg-deb -x "$tmp"/"$PROM_DEB"_*.deb "$TOOLS/prometheus"
  rm -rf "$tmp"
fi
say "$("$PROMTOOL" --version 2>&1 | head -1); redis_exporter $(sed -n 's/^require github.com\/oliver006\/redis_exporter //p' "$root/monitoring/test/tools/exporter/go.mod")"

cd "$root/monitoring"
echo "==> promtool check rules, promtool test rules (monitoring/prometheus)"
"$PROMTOOL" check rules prometheus/alerts.yml
(cd prometheus && "$PROMTOOL" test rules alerts_test.yml)

echo "==> the Grafana dashboard: lint rules and PromQL (monitoring/test/check_dashboard.py)"
queries=$(mktemp)
trap 'rm -f "$queries"' EXIT
python3 test/check_dashboard.py grafana/redis-ratelimit.json "$PROMTOOL" --queries "$queries"

echo "==> redis_exporter and Prometheus scraping a server under load (monitoring/test/scrape_test.py)"
python3 test/scrape_test.py --module "$RL_MODULE" --server "$SERVER" --exporter "$EXPORTER" \
  --prometheus "$PROMETHEUS" --queries "$queries"
