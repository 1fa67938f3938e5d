#!/usr/bin/env bash
# Install the release tools from PyPI into a virtualenv, once: ziglang and cargo-zigbuild (the
# module built against glibc 2.17 for `make dist`), auditwheel (checks the wheel's manylinux tag).
# Prints the venv's bin directory on stdout; messages go to stderr.
#
# usage: scripts/release-tools.sh     venv: ${RL_RELEASE_VENV:-$HOME/.cache/redis-ratelimit/release}
set -euo pipefail

VENV=${RL_RELEASE_VENV:-$HOME/.cache/redis-ratelimit/release}
PY=${PYTHON:-python3}
PACKAGES=(ziglang==0.14.1 cargo-zigbuild==0.24.1 auditwheel==6.8.2)
STAMP="$VENV/.installed"

NAME=release-tools
. "$(dirname "$0")/lib.sh"

if [ -x "$VENV/bin/cargo-zigbuild" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${PACKAGES[*]}" ]; then
  echo "$VENV/bin"
  exit 0
fi
say "installing ${PACKAGES[*]} from PyPI into $VENV" >&2
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" >&2 ||
  die "could not create a virtualenv with $PY (on Debian: apt-get install python3-venv)"
"$VENV/bin/pip" install -q --disable-pip-version-check --retries 2 --timeout 30 "${PACKAGES[@]}" >&2 ||
  die "pip install ${PACKAGES[*]} failed (is PyPI reachable?)"
# cargo-zigbuild runs `python -m ziglang`: the venv's python must be first on PATH when it runs.
"$VENV/bin/python" -m ziglang version >/dev/null || die "ziglang does not run"
echo "${PACKAGES[*]}" >"$STAMP"
echo "$VENV/bin"
