#!/usr/bin/env bash
# The quickstart: build daicho, import two sample ledgers into an embedded SQLite ledger, and
# list what is ready. Safe to run again: the second import adds nothing (the merge is idempotent).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
cargo build --release --quiet -p daicho
daicho="$root/target/release/daicho"
db="${DAICHO_DB:-$root/target/quickstart/ledger.db}"
export DAICHO_DB="$db"

"$daicho" init
"$daicho" import "$here/tasks.md"
"$daicho" import "$here/tasks.json"
echo
echo "== every task =="
"$daicho" list
echo
echo "== ready to run, in run order =="
"$daicho" ready
echo
echo "The ledger is $db. Try: DAICHO_DB=$db $daicho set T-500 --status done && DAICHO_DB=$db $daicho ready"
