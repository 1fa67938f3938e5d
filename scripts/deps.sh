#!/usr/bin/env bash
# Install what building and testing the module needs, when it is missing; say what is installed.
# Prints one short line when everything is already there.
#
#   Debian: redis-server (redis-server, plus redis-cli and redis-benchmark from redis-tools)
#           libclang-dev (bindgen, used by the redis-module crate's build script)
#   Rust:   the rustfmt and clippy components; checks that rustc is at least Cargo.toml's
#           rust-version and says how to get a newer toolchain when it is not
#
# It never starts or stops a redis-server. The extra server versions of the compatibility
# matrix are installed by scripts/servers.sh.
set -euo pipefail

NAME=deps
. "$(dirname "$0")/lib.sh"

command -v cargo >/dev/null 2>&1 || die "cargo not found; install a Rust toolchain with rustup"

# The toolchain must be at least Cargo.toml's rust-version. Debian's apt packages are older
# (bookworm's rustc is 1.63), so say how to get a newer one.
root=$(cd "$(dirname "$0")/.." && pwd)
need=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$root/Cargo.toml")
have=$(rustc --version 2>/dev/null | awk '{print $2}')
if [ -n "$need" ]; then
  [ -n "$have" ] || die "rustc not found; install a Rust toolchain with rustup (https://rustup.rs)"
  if [ "$(printf '%s\n%s\n' "$need" "${have%%-*}" | sort -V | head -1)" != "$need" ]; then
    hint="install rustup (https://rustup.rs) and run: rustup toolchain install stable"
    command -v rustup >/dev/null 2>&1 && hint="run: rustup update stable && rustup default stable"
    die "rustc $have is older than the $need this project needs (Cargo.toml rust-version);" \
      "distribution packages are often older; $hint"
  fi
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

missing=()
for pkg in redis-server libclang-dev; do
  installed "$pkg" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get; install them by hand"
  say "installing ${missing[*]} from apt"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -q
  as_root apt-get install -y -q --no-install-recommends "${missing[@]}"
  # The package's service script may have started a server on 6379 (not in containers without
  # an init system). It is left alone; `make run` needs that port, so mention it.
  if command -v redis-cli >/dev/null 2>&1 && redis-cli -p 6379 ping >/dev/null 2>&1; then
    say "note: a redis-server is already listening on 127.0.0.1:6379 (the system service);" \
      "make run needs that port"
  fi
fi

components=()
cargo fmt --version >/dev/null 2>&1 || components+=(rustfmt)
cargo clippy --version >/dev/null 2>&1 || components+=(clippy)
if [ ${#components[@]} -gt 0 ]; then
  command -v rustup >/dev/null 2>&1 || die "missing ${components[*]} and no rustup to install them"
  say "installing Rust components ${components[*]} with rustup"
  rustup component add "${components[@]}"
fi

if [ ${#missing[@]} -eq 0 ] && [ ${#components[@]} -eq 0 ]; then
  say "ok (rustc $have >= $need, $(redis-server --version | awk '{print $3}' | sed 's/^v=//;s/^/redis-server /'), libclang-dev, rustfmt, clippy)"
fi
