#!/usr/bin/env bash
# Build the release tarball: dist/redis-ratelimit-<version>-linux-x86_64.tar.gz holding the
# stripped module built against glibc 2.17 (cargo-zigbuild), ratelimit.conf, LICENSE,
# CHANGELOG.md, INSTALL.md and SHA256SUMS; the unpacked tree stays next to it (make test loads
# the module from there). Fails when any symbol needs a glibc newer than the baseline.
#
# Reproducible: paths are remapped (--remap-path-prefix), no debug info is built, the archive's
# times are SOURCE_DATE_EPOCH (the last commit's time unless set), its entries sorted and owned
# by 0:0, and gzip stores no name or time. Building twice gives the same SHA-256.
#
# usage: scripts/dist.sh             (make dist)
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=dist
. scripts/lib.sh

GLIBC_BASELINE=2.17
ZIG_TARGET=x86_64-unknown-linux-gnu
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
[ -n "$VERSION" ] || die "no version in Cargo.toml"
IFS=. read -r MAJOR MINOR PATCH <<<"$VERSION"
MODULE_VER=$((MAJOR * 10000 + MINOR * 100 + PATCH))
TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
PKG=redis-ratelimit-$VERSION-linux-x86_64
OUT=dist/$PKG

BIN=$(scripts/release-tools.sh)
export PATH="$BIN:$PATH"
if ! rustup target list --installed 2>/dev/null | grep -qx "$ZIG_TARGET"; then
  if command -v rustup >/dev/null 2>&1; then
    say "adding the rustup target $ZIG_TARGET"
    rustup target add "$ZIG_TARGET"
  fi
fi

SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
export SOURCE_DATE_EPOCH
# Paths of this checkout, cargo's registry and the toolchain do not reach the binary.
CARGO_HOME_DIR=${CARGO_HOME:-$HOME/.cargo}
RUSTUP_HOME_DIR=${RUSTUP_HOME:-$HOME/.rustup}
export RUSTFLAGS="--remap-path-prefix=$PWD=/build/redis-ratelimit --remap-path-prefix=$CARGO_HOME_DIR=/cargo --remap-path-prefix=$RUSTUP_HOME_DIR=/rustup"
export CARGO_PROFILE_RELEASE_DEBUG=0

say "building the module $VERSION for $ZIG_TARGET with glibc $GLIBC_BASELINE (cargo zigbuild)"
cargo zigbuild --locked --release --lib --target "$ZIG_TARGET.$GLIBC_BASELINE"
SO="$TARGET_DIR/$ZIG_TARGET/release/libredis_ratelimit.so"
[ -f "$SO" ] || die "no module at $SO"

rm -rf "$OUT" "dist/$PKG.tar.gz"
mkdir -p "$OUT"
strip --strip-all -o "$OUT/libredis_ratelimit.so" "$SO"
# Redis 7 refuses to load a module file without execute permission.
chmod 0755 "$OUT/libredis_ratelimit.so"

# The glibc check: every versioned symbol the module imports must be at most the baseline.
glibc_check() {
  local so=$1 newest
  newest=$(objdump -T "$so" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
  say "glibc versions needed by $(basename "$so"): $(objdump -T "$so" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tr '\n' ' ')"
  say "shared libraries needed: $(objdump -p "$so" | awk '/NEEDED/{print $2}' | tr '\n' ' ')"
  if [ "$(printf '%s\n%s\n' "$newest" "$GLIBC_BASELINE" | sort -V | tail -1)" != "$GLIBC_BASELINE" ]; then
    objdump -T "$so" | grep "GLIBC_$newest" >&2 || true
    die "$(basename "$so") needs GLIBC_$newest, newer than the baseline $GLIBC_BASELINE"
  fi
  say "glibc check passed: the newest version needed is GLIBC_$newest (baseline $GLIBC_BASELINE)"
}
glibc_check "$OUT/libredis_ratelimit.so"

cp packaging/ratelimit.conf "$OUT/ratelimit.conf"
sed "s/@VERSION@/$VERSION/g; s/@MODULE_VER@/$MODULE_VER/g" packaging/INSTALL.md >"$OUT/INSTALL.md"
cp LICENSE CHANGELOG.md "$OUT/"
(cd "$OUT" && sha256sum CHANGELOG.md INSTALL.md LICENSE libredis_ratelimit.so ratelimit.conf >SHA256SUMS)
find "$OUT" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
  --mode='go-w' --format=gnu -C dist -cf - "$PKG" | gzip -9 -n >"dist/$PKG.tar.gz"
(cd dist && sha256sum "$PKG.tar.gz" >"$PKG.tar.gz.sha256")
say "dist/$PKG.tar.gz: $(cut -d' ' -f1 "dist/$PKG.tar.gz.sha256")"
