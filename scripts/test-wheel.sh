#!/usr/bin/env bash
# Test the module's wheel: auditwheel show (manylinux_2_17_x86_64), then pip install it into a
# fresh virtualenv, check that redis_ratelimit_module.path() is the installed .so, load it into
# Debian's redis-server through the Python client's pytest fixture with no module given (the
# fixture finds the wheel), and run the smoke suite (tests/smoke.rs) on it.
# Installs redis, pytest and hatchling (pinned as scripts/clients.sh does) from PyPI into that
# virtualenv (pip's cache makes it quick after the first time).
#
# usage: scripts/test-wheel.sh      (make test-wheel)
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=test-wheel
. scripts/lib.sh

VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
WHEEL=dist/redis_ratelimit_module-$VERSION-py3-none-manylinux_2_17_x86_64.whl
[ -f "$WHEEL" ] || die "no $WHEEL: run make wheel first"
BIN=$(scripts/release-tools.sh)
PIP=(--disable-pip-version-check --retries 2 --timeout 30 -q)

say "auditwheel show $WHEEL"
show=$("$BIN/auditwheel" show "$WHEEL")
echo "$show"
grep -q 'consistent with the following platform tag: "manylinux_2_17_x86_64"' <<<"$(tr '\n' ' ' <<<"$show" | tr -s ' ')" ||
  die "auditwheel does not find the wheel manylinux_2_17_x86_64"

venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv"
say "pip install $WHEEL (and redis, pytest, hatchling, ./clients/python) into a fresh virtualenv"
"$venv/bin/pip" install "${PIP[@]}" "$WHEEL"
"$venv/bin/pip" install "${PIP[@]}" redis==8.1.0 pytest==9.2.0 hatchling==1.33.0
"$venv/bin/pip" install "${PIP[@]}" --no-deps --no-build-isolation ./clients/python
so=$("$venv/bin/python" -c 'import redis_ratelimit_module as m; print(m.path())')
[ -f "$so" ] || die "path() = $so: no such file"
case "$so" in "$venv"/*) ;; *) die "path() = $so is not inside the virtualenv" ;; esac
cmp -s "$so" "dist/redis-ratelimit-$VERSION-linux-x86_64/libredis_ratelimit.so" ||
  die "the wheel's module is not the tarball's"
say "ok: path() = $so"

# The pytest fixture, with no --ratelimit-module and no RL_MODULE, loads the wheel's module.
cat >"$venv/test_fixture.py" <<'PY'
import redis_ratelimit_module


def test_the_fixture_loads_the_wheels_module(ratelimit_redis):
    modules = {m[b"name"]: m for m in ratelimit_redis.module_list()}
    assert modules[b"ratelimit"][b"path"].decode() == redis_ratelimit_module.path()
    reply = ratelimit_redis.execute_command("RL.GCRA", "k", 10, 1, "1s")
    if isinstance(reply, dict):  # RESP3
        reply = [reply[f] for f in (b"granted", b"limit", b"remaining", b"retry_after_ms", b"reset_after_ms")]
    assert reply == [1, 10, 9, 0, 1000]
PY
(cd "$venv" && env -u RL_MODULE "$venv/bin/python" -m pytest -q -p no:cacheprovider test_fixture.py)

say "the smoke suite on the wheel's module (Debian's redis-server)"
RL_MODULE=$so RL_SERVER=${REDIS_SERVER:-redis-server} RL_LD_LIBRARY_PATH= cargo test --quiet --test smoke -- --test-threads=2
