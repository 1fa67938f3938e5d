#!/usr/bin/env bash
# Build the Debian package of the module from the release tarball's tree (make dist):
# dist/redis-ratelimit_<version>-1_amd64.deb with
#   /usr/lib/redis/modules/libredis_ratelimit.so     the module (glibc 2.17 baseline)
#   /etc/redis/ratelimit.conf                         the loadmodule line and the settings, commented
#   /usr/share/doc/redis-ratelimit/                   README.Debian, copyright, changelogs
# then runs lintian on it (installed from apt when missing) and fails on any error.
# Reproducible: file times are SOURCE_DATE_EPOCH (the last commit's), which dpkg-deb also uses.
#
# usage: scripts/deb.sh          (make deb)
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=deb
. scripts/lib.sh

VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
DEBVERSION=$VERSION-1
TREE=dist/redis-ratelimit-$VERSION-linux-x86_64
[ -f "$TREE/libredis_ratelimit.so" ] || die "no $TREE/libredis_ratelimit.so: run make dist first"
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
export SOURCE_DATE_EPOCH
DATE=$(date -u -R -d "@$SOURCE_DATE_EPOCH")

for tool in dpkg-deb lintian; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || die "$tool is missing and there is no apt-get"
    say "installing $tool from apt"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -q
    as_root apt-get install -y -q --no-install-recommends "$([ "$tool" = dpkg-deb ] && echo dpkg || echo lintian)"
  fi
done

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
pkg=$root/redis-ratelimit
doc=$pkg/usr/share/doc/redis-ratelimit
install -d -m 0755 "$pkg/DEBIAN" "$pkg/usr/lib/redis/modules" "$pkg/etc/redis" "$doc"
install -m 0755 "$TREE/libredis_ratelimit.so" "$pkg/usr/lib/redis/modules/libredis_ratelimit.so"
install -m 0644 packaging/ratelimit.conf "$pkg/etc/redis/ratelimit.conf"
install -m 0644 packaging/debian/README.Debian packaging/debian/copyright "$doc/"
gzip -9n -c CHANGELOG.md >"$doc/changelog.gz"
printf 'redis-ratelimit (%s) unstable; urgency=medium\n\n  * Release %s (see changelog.gz).\n\n -- %s  %s\n' \
  "$DEBVERSION" "$VERSION" "$(sed -n 's/^Maintainer: //p' packaging/debian/control)" "$DATE" |
  gzip -9n >"$doc/changelog.Debian.gz"
echo /etc/redis/ratelimit.conf >"$pkg/DEBIAN/conffiles"
size=$(du -k -s --exclude=DEBIAN "$pkg" | cut -f1)
sed "s/@DEBVERSION@/$DEBVERSION/; s/@SIZE@/$size/" packaging/debian/control >"$pkg/DEBIAN/control"
(cd "$pkg" && find usr -type f | LC_ALL=C sort | xargs md5sum >DEBIAN/md5sums)
chmod 0644 "$pkg/DEBIAN/"*
find "$pkg" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

out=dist/redis-ratelimit_${DEBVERSION}_amd64.deb
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$out" >/dev/null
say "built $out"
say "lintian $out:"
# lintian refuses to run as root unless told it may.
lintian_out=$(lintian --allow-root --info "$out" 2>&1) || true
echo "${lintian_out:-(no tags)}"
if grep -q '^E: ' <<<"$lintian_out"; then
  die "lintian reports errors on $out"
fi
(cd dist && sha256sum "$(basename "$out")" >"$(basename "$out").sha256")
say "$out: $(cut -d' ' -f1 "$out.sha256")"
