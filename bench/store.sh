#!/usr/bin/env bash
# History store throughput: 100,000 deliveries through the Recorder (the
# tunnel's path into SQLite) from 64 concurrent tasks, then the time to open
# the result and read the first history page, as the TUI does, and walk it
# all with a filter nothing matches.
#
#   bench/store.sh            # 100,000 deliveries
#   bench/store.sh 20000      # fewer
#   bench/store.sh 2000 1048576   # fewer, with 1 MiB request bodies
#
# Targets: over 20,000 deliveries/s; first page
# of a 100,000-delivery history in under 300 ms.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-100000}
pad=${2:-900}
db=$(mktemp -d)/history.db
trap 'rm -rf "$(dirname "$db")"' EXIT
cargo run --quiet --release -p portpreview --example store_bench -- "$count" "$db" "$pad"
