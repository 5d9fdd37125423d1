#!/usr/bin/env bash
# Runs README's test command as a machine with only the Rust toolchain would: the optional
# tools the tests use (bubblewrap, PostgreSQL, tmux, node, HAProxy, the Python venvs of .ci/run)
# are hidden behind a PATH that lacks them and test variables that point nowhere. Without
# CI=true every test needing one must print SKIPPED and pass; with CI=true the run must fail.
#
#   scripts/fresh-machine.sh             # expect exit 0, with SKIPPED lines
#   CI=true scripts/fresh-machine.sh     # expect a non-zero exit
# Extra arguments go to `cargo test` (e.g. `-p cadre-sandbox`).
set -euo pipefail
cd "$(dirname "$0")/.."

hidden=(bwrap tmux node npm npx haproxy initdb pg_ctl postgres pg_config psql claude)
shadow=$(mktemp -d)
trap 'rm -rf "$shadow"' EXIT
# One directory of links to every program on PATH except the hidden ones (first one wins,
# as the shell's lookup does).
IFS=: read -r -a dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [ -d "$d" ] || continue
  for f in "$d"/*; do
    name=${f##*/}
    [ -x "$f" ] && [ ! -e "$shadow/$name" ] || continue
    for h in "${hidden[@]}"; do [ "$name" = "$h" ] && continue 2; done
    ln -s "$f" "$shadow/$name"
  done
done

nowhere="$shadow/not-installed"
export PATH="$shadow"
export CADRE_PG_BIN="$nowhere" CADRE_A2A_VENV="$nowhere" CADRE_A2A03_VENV="$nowhere" \
  CADRE_MCP_VENV="$nowhere" CADRE_MCP_EVERYTHING="$nowhere" CADRE_A2A_TCK="$nowhere"
echo "== cargo test --workspace with ${hidden[*]} and the venvs hidden (CI=${CI:-})"
cargo test --workspace "$@"
