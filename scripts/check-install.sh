#!/usr/bin/env bash
# Builds a throw-away crate the way a new user would make it from the
# README: a clone of this repository at `../redlock` beside it (a link to
# this checkout), `cargo new`, the "Install" section's dependencies pasted
# into its Cargo.toml exactly as shown (their `[patch.crates-io]` points at
# the clone), and each `rust` block of the README as a program of its own.
# Any warning, in the snippet's code or in ours, fails the check.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
readme="$root/README.md"
dir="$(mktemp -d "${TMPDIR:-/tmp}/redlock-install-XXXXXX")"
trap 'rm -rf "$dir"' EXIT

# The first ```toml block after "## Install".
deps="$(awk '/^## Install/{inst=1} inst&&/^```toml/{on=1;next} on&&/^```/{exit} on{print}' "$readme")"
if [ -z "$deps" ]; then
  echo "error: README.md has no \`\`\`toml block under \"## Install\"" >&2
  exit 1
fi

ln -s "$root" "$dir/redlock"
app="$dir/service"
mkdir -p "$app/src/bin"
{
  printf '[package]\nname = "readme-user"\nversion = "0.1.0"\nedition = "2024"\npublish = false\n\n'
  printf '%s\n' "$deps"
} >"$app/Cargo.toml"
printf 'fn main() {}\n' >"$app/src/main.rs"

# Every ```rust block of the README, as shown (no hidden lines allowed).
awk -v out="$app/src/bin" '
  /^```rust/ { n++; file = sprintf("%s/readme_%d.rs", out, n); on = 1; next }
  on && /^```/ { on = 0; close(file); next }
  on { print > file }
' "$readme"
count="$(ls "$app/src/bin" | wc -l)"
if [ "$count" -eq 0 ]; then
  echo "error: README.md has no \`\`\`rust blocks" >&2
  exit 1
fi
if grep -n '^# \|^#$' "$app"/src/bin/*.rs; then
  echo "error: a README block hides lines from the reader (lines starting with '# ')" >&2
  exit 1
fi

# The same versions as the workspace, where they fit.
cp "$root/Cargo.lock" "$app/Cargo.lock"
echo "building $count README programs in $app from the Install section"
log="$dir/build.log"
if ! (cd "$app" && cargo build --bins --quiet --color never) >"$log" 2>&1; then
  cat "$log"
  echo "error: a crate made from the README's Install section does not build" >&2
  exit 1
fi
if grep -q '^warning' "$log"; then
  cat "$log"
  echo "error: the README's programs build with warnings" >&2
  exit 1
fi
echo "ok: the README's Install section and its $count programs build warning-free"
