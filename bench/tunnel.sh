#!/usr/bin/env bash
# Tunnel throughput, latency and relay memory: direct calls, PortPreview
# (recording on and off) and bore, side by side in one run on loopback.
#
#   bench/tunnel.sh            # 3 rounds of 5 s per measurement
#   DURATION=10 ROUNDS=1 bench/tunnel.sh
#
# Every round measures each scenario against every target in turn, so a
# disturbance on this shared machine hits one round of all of them rather
# than all rounds of one; the table gives each target's median round.
#
# Needs wrk (installed with apt-get when missing) and bore (installed with
# `cargo install bore-cli` into bench/.tools). Prints a table of requests/s
# and p50/p99 latency with ratios to direct and to bore, then the CPU time
# the relay, the client and its history writer spend per request, which
# says what recording costs even when the machine's speed drifts.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
duration=${DURATION:-5}
rounds=${ROUNDS:-3}
out=$root/bench/out
tools=$root/bench/.tools
mkdir -p "$out" "$tools"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

if ! command -v wrk >/dev/null; then
  apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
if [ ! -x "$tools/bin/bore" ]; then
  cargo install --quiet --locked bore-cli --root "$tools"
fi
cargo build --quiet --release -p portpreview -p portpreview-server -p portpreview-e2e \
  --bins --example bench_handler --example idle_tunnels
bin=${CARGO_TARGET_DIR:-$root/target}/release

# wait_for FILE PATTERN: the first line of FILE matching PATTERN, within 20 s.
wait_for() {
  for _ in $(seq 200); do
    if line=$(grep -m1 -E "$2" "$1" 2>/dev/null); then echo "$line"; return 0; fi
    sleep 0.1
  done
  echo "timed out waiting for '$2' in $1" >&2; cat "$1" >&2; return 1
}
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
# ticks PID [THREAD]: CPU time (user + system, in clock ticks) of process
# PID's threads, or only of those named THREAD.
ticks() {
  local total=0 task stat fields
  for task in /proc/"$1"/task/*; do
    if [ -n "${2:-}" ] && [ "$(cat "$task/comm" 2>/dev/null)" != "$2" ]; then continue; fi
    stat=$(cat "$task/stat" 2>/dev/null) || continue
    fields=(${stat##*) })
    total=$((total + fields[11] + fields[12]))
  done
  echo "$total"
}
hwm_kib() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }

"$bin/examples/bench_handler" 127.0.0.1:0 >"$out/handler.log" &
pids+=($!)
handler=$(wait_for "$out/handler.log" '^127')

"$bin/portpreview-server" --listen 127.0.0.1:0 >"$out/relay.log" 2>&1 &
relay_pid=$!
pids+=($relay_pid)
relay=$(wait_for "$out/relay.log" 'listening on' | grep -oE '127\.0\.0\.1:[0-9]+')

rm -f "$out"/bench*.db*
"$bin/portpreview" http "$handler" --server "http://$relay" --no-tui --db "$out/bench.db" >"$out/client.log" 2>&1 &
client_pid=$!
pids+=($client_pid)
pp=$(wait_for "$out/client.log" '^Forwarding' | awk '{print $2}')
"$bin/portpreview" http "$handler" --server "http://$relay" --no-tui --no-record --db "$out/bench-off.db" \
  >"$out/client-off.log" 2>&1 &
client_off_pid=$!
pids+=($client_off_pid)
pp_off=$(wait_for "$out/client-off.log" '^Forwarding' | awk '{print $2}')

"$tools/bin/bore" server --min-port 20000 --max-port 30000 >"$out/bore-server.log" 2>&1 &
pids+=($!)
sleep 0.5
"$tools/bin/bore" local "${handler##*:}" --to 127.0.0.1 >"$out/bore.log" 2>&1 &
pids+=($!)
bore=$(wait_for "$out/bore.log" 'listening at' | grep -oE '127\.0\.0\.1:[0-9]+|localhost:[0-9]+' | tail -1)

head -c 1024 /dev/zero | tr '\0' 'x' >"$out/1k.body"
head -c $((1024 * 1024)) /dev/zero | tr '\0' 'x' >"$out/1m.body"
for size in 1k 1m; do
  cat >"$out/post-$size.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("$out/$size.body", "rb"); wrk.body = f:read("*a"); f:close()
LUA
done

results=$out/results.tsv
cpu=$out/cpu.tsv
: >"$results"
: >"$cpu"
# measure NAME SCENARIO CONNECTIONS SIZE URL
measure() {
  local threads=$(( $3 < 2 ? 1 : 2 )) client=
  case $1 in portpreview) client=$client_pid ;; portpreview-norec) client=$client_off_pid ;; esac
  local cpu_before=()
  [ -n "$client" ] && cpu_before=("$(ticks "$relay_pid")" "$(ticks "$client")" "$(ticks "$client" history-writer)")
  wrk -t"$threads" -c"$3" -d"${duration}s" --latency -s "$out/post-$4.lua" "$5" >"$out/wrk-$2-$1.txt" 2>&1 || true
  local rps p50 p99
  rps=$(awk '/^Requests\/sec/ {print $2}' "$out/wrk-$2-$1.txt")
  p50=$(awk '$1 == "50%" {print $2}' "$out/wrk-$2-$1.txt")
  p99=$(awk '$1 == "99%" {print $2}' "$out/wrk-$2-$1.txt")
  printf '%s\t%s\t%s\t%s\t%s\n' "$2" "$1" "${rps:-0}" "${p50:-?}" "${p99:-?}" >>"$results"
  if [ -n "$client" ]; then
    local requests
    requests=$(awk '/requests in/ {print $1}' "$out/wrk-$2-$1.txt")
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$2" "$1" "${requests:-0}" "$(($(ticks "$relay_pid") - cpu_before[0]))" \
      "$(($(ticks "$client") - cpu_before[1]))" "$(($(ticks "$client" history-writer) - cpu_before[2]))" >>"$cpu"
  fi
}

for _ in $(seq "$rounds"); do
  for scenario in "1KiB-c1 1 1k" "1KiB-c50 50 1k" "1MiB-c4 4 1m"; do
    set -- $scenario
    measure direct "$1" "$2" "$3" "http://$handler/hook"
    measure portpreview "$1" "$2" "$3" "$pp/hook"
    measure portpreview-norec "$1" "$2" "$3" "$pp_off/hook"
    measure bore "$1" "$2" "$3" "http://$bore/hook"
  done
done
relay_peak=$(hwm_kib $relay_pid)
delivered=$(sqlite3 "$out/bench.db" 'select count(*) from deliveries' 2>/dev/null || echo '?')

# Idle tunnels: a fresh relay, 1,000 tunnels, RSS before and after.
"$bin/portpreview-server" --listen 127.0.0.1:0 --max-connections-per-ip 2000 >"$out/relay-idle.log" 2>&1 &
idle_pid=$!
pids+=($idle_pid)
idle_relay=$(wait_for "$out/relay-idle.log" 'listening on' | grep -oE '127\.0\.0\.1:[0-9]+')
sleep 0.5
before=$(rss_kib $idle_pid)
mkfifo "$out/hold.$$"
"$bin/examples/idle_tunnels" "ws://$idle_relay" 1000 <"$out/hold.$$" >"$out/idle.log" 2>&1 &
pids+=($!)
exec 9>"$out/hold.$$"
wait_for "$out/idle.log" '^ready' >/dev/null
sleep 1
after=$(rss_kib $idle_pid)
exec 9>&-
rm -f "$out/hold.$$"

python3 - "$results" "$relay_peak" "$before" "$after" "$delivered" "$duration" "$rounds" "$cpu" "$(getconf CLK_TCK)" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
peak, before, after, delivered, duration, rounds = sys.argv[2:8]
cpu_rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[8]) if l.strip()]
tick_us = 1e6 / int(sys.argv[9])
def ms(text):
    if text in ("?", ""): return float("nan")
    for unit, f in (("us", 1e-3), ("ms", 1.0), ("s", 1000.0)):
        if text.endswith(unit) and (unit != "s" or not text.endswith(("us", "ms"))):
            return float(text[: -len(unit)]) * f
    return float(text)
runs = {}
for r in rows:
    runs.setdefault((r[0], r[1]), []).append((float(r[2]), ms(r[3]), ms(r[4])))
# Each target's median round by requests/s, latencies from that same round.
by = {k: sorted(v)[len(v) // 2] for k, v in runs.items()}
scenarios = list(dict.fromkeys(r[0] for r in rows))
names = ["direct", "portpreview", "portpreview-norec", "bore"]
print(f"\nPortPreview tunnel benchmark (median of {rounds} rounds of {duration} s per run, loopback, wrk)\n")
print(f"{'scenario':<10} {'target':<18} {'req/s':>10} {'×direct':>8} {'×bore':>7} {'p50 ms':>8} {'p99 ms':>8} {'+p50 ms':>8}")
for s in scenarios:
    d = by.get((s, "direct")); b = by.get((s, "bore"))
    for n in names:
        v = by.get((s, n))
        if not v: continue
        xd = v[0] / d[0] if d and d[0] else float("nan")
        xb = v[0] / b[0] if b and b[0] else float("nan")
        added = v[1] - d[1] if d else float("nan")
        print(f"{s:<10} {n:<18} {v[0]:>10.0f} {xd:>8.2f} {xb:>7.2f} {v[1]:>8.3f} {v[2]:>8.3f} {added:>8.3f}")
    on, off = by.get((s, "portpreview")), by.get((s, "portpreview-norec"))
    if on and off and off[0]:
        print(f"{'':<10} recording on / off: {on[0] / off[0]:.2f}")
    print()
# CPU per request: each PortPreview run's process times over its request
# count; the median round per column, as noise hits the columns apart.
cpu = {}
for scenario, target, requests, *ticks in cpu_rows:
    if int(requests):
        cpu.setdefault((scenario, target), []).append([int(t) * tick_us / int(requests) for t in ticks])
def median(xs): return sorted(xs)[len(xs) // 2]
print("CPU per request, µs (median round): relay, client (all its threads), the client's history writer")
for s in scenarios:
    for n in ("portpreview", "portpreview-norec"):
        v = cpu.get((s, n))
        if not v: continue
        relay, client, writer = (median([r[i] for r in v]) for i in range(3))
        print(f"{s:<10} {n:<18} relay {relay:>6.1f}   client {client:>6.1f}   writer {writer:>6.1f}")
    on, off = cpu.get((s, "portpreview")), cpu.get((s, "portpreview-norec"))
    if on and off:
        writer = median([r[2] for r in on])
        forwarding = median([r[1] - r[2] for r in on]) - median([r[1] for r in off])
        print(f"{'':<10} recording adds {forwarding:.1f} µs to the client's forwarding and {writer:.1f} µs on its writer thread")
print()
print(f"relay peak RSS over the whole run: {int(peak) / 1024:.1f} MiB")
per = (int(after) - int(before)) / 1000
print(f"relay RSS per idle tunnel (1,000 tunnels): {per:.1f} KiB ({int(before)/1024:.1f} MiB -> {int(after)/1024:.1f} MiB)")
print(f"deliveries recorded during the run: {delivered}")
PY
