#!/usr/bin/env bash
# Replay overhead per attempt beyond the handler's own time.
#
#   bench/replay.sh            # 2,000 sequential attempts
#   TIMES=500 bench/replay.sh
#
# Replays one fixture against a minimal local handler and compares the time
# per attempt (wall clock over the whole run, and the median attempt as the
# report measures it) with the handler's own median latency measured by wrk
# on one connection. Target: under 1 ms of overhead.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
times=${TIMES:-2000}
out=$root/bench/out
mkdir -p "$out"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
cargo build --quiet --release -p portpreview -p portpreview-e2e --bins --example bench_handler
bin=${CARGO_TARGET_DIR:-$root/target}/release

"$bin/examples/bench_handler" 127.0.0.1:0 >"$out/replay-handler.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$out/replay-handler.log" ] && break; sleep 0.05; done
handler=$(head -1 "$out/replay-handler.log")

body='{"id":"evt_1ReplayBench","object":"event","type":"invoice.paid","data":{"object":{"id":"in_1","amount_paid":4200}}}'
cat >"$out/replay-fixture.json" <<JSON
{"portpreview_fixture": 1, "method": "POST", "path": "/webhooks/stripe", "target": "http://$handler",
 "headers": [{"name": "content-type", "value": "application/json"}],
 "body": $(printf '%s' "$body" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')}
JSON
printf 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = %s\n' \
  "$(printf '%s' "$body" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')" >"$out/replay-post.lua"
wrk -t1 -c1 -d5s --latency -s "$out/replay-post.lua" "http://$handler/webhooks/stripe" >"$out/replay-direct.txt"

start=$(date +%s%N)
"$bin/portpreview" replay --from "$out/replay-fixture.json" --times "$times" --json \
  --db "$out/replay-bench.db" >"$out/replay.json" || true
elapsed_ns=$(( $(date +%s%N) - start ))

python3 - "$out/replay.json" "$out/replay-direct.txt" "$elapsed_ns" "$times" <<'PY'
import json, statistics, sys
report = json.load(open(sys.argv[1]))
direct = open(sys.argv[2]).read().split()
elapsed_ms = int(sys.argv[3]) / 1e6
times = int(sys.argv[4])
def ms(text):
    for unit, f in (("us", 1e-3), ("ms", 1.0), ("s", 1000.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * f
    return float(text)
p50 = ms(direct[direct.index("50%") + 1])
attempts = [a["duration_ms"] for a in report["attempts"] if a.get("duration_ms") is not None]
median = statistics.median(attempts)
wall = elapsed_ms / times
print(f"\nPortPreview replay overhead ({times} sequential attempts, loopback)\n")
print(f"handler's own median latency (wrk, 1 connection): {p50:.3f} ms")
print(f"median attempt as replay measures it:            {median:.3f} ms  (+{median - p50:.3f} ms)")
print(f"wall clock per attempt, whole run included:      {wall:.3f} ms  (+{wall - p50:.3f} ms)")
print(f"verdict: {report.get('verdict')}  attempts answered: {len(attempts)}")
PY
