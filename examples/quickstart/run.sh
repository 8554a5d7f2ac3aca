#!/usr/bin/env bash
# The quickstart: seeds/002's "ship the parser feature" plan (plan.md) pulled and run by
# `daicho serve` on an embedded SQLite ledger (target/quickstart/ledger.db). The chain
# T-1 … T-5 runs on its own; T-6 (publish, outbound) waits in the approval queue.
# Ctrl-C stops it. QUICKSTART_ONCE=1 runs one round and prints the ledger (for CI).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
db="${DAICHO_DB:-$root/target/quickstart/ledger.db}"
daicho() { cargo run --release --quiet -p daicho -- --db "$db" --config "$here/daicho.toml" "$@"; }

daicho init
if [ -n "${QUICKSTART_ONCE:-}" ]; then
  daicho serve --now --once
  echo
  daicho list
  echo
  daicho approve
  exit 0
fi
echo "serving $here/daicho.toml (every minute: pull plan.md, run what is ready); Ctrl-C stops."
echo "In another terminal:  cargo run --release -- --db $db list"
echo "Approve the publish step:  cargo run --release -- --db $db --config $here/daicho.toml approve T-6"
daicho serve --now
