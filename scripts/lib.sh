# Helpers the install scripts share. Set NAME (the prefix of every message), then source it:
#   NAME=deps; . "$(dirname "$0")/lib.sh"

say() { echo "$NAME: $*"; }

die() {
  echo "$NAME: ERROR: $*" >&2
  exit 1
}

# Run as root, or through sudo when it exists.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "need root (or sudo) to run: $*"
  fi
}
