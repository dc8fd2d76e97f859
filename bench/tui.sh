#!/usr/bin/env bash
# How fast `portpreview tui` opens a 100,000-delivery history, and how much
# memory it takes: time from launch to the first frame with rows drawn, and
# peak RSS, over several runs in a real pseudo-terminal (tmux).
#
#   bench/tui.sh                      # release build, 100,000 deliveries, 5 runs
#   PROFILE=dev COUNT=20000 RUNS=3 bench/tui.sh
#
# The TUI exits right after its first frame when
# PORTPREVIEW_TUI_EXIT_AFTER_FIRST_FRAME=1, so each run times the whole
# open: SQLite open, first page, count, layout and draw. Target: < 300 ms.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
count=${COUNT:-100000}
runs=${RUNS:-5}
profile=${PROFILE:-release}
target_ms=300

command -v tmux >/dev/null || { apt-get update -qq && apt-get install -y -qq tmux >/dev/null; }
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }

work=$(mktemp -d)
sock="portpreview-bench-$$"
cleanup() { tmux -L "$sock" kill-server 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

cargo build --quiet --profile "$profile" -p portpreview --bin portpreview --example fill_history
dir=$profile
[ "$profile" = dev ] && dir=debug
bin=${CARGO_TARGET_DIR:-$root/target}/$dir

db=$work/history.db
fill_start=$(date +%s%N)
"$bin/examples/fill_history" "$db" "$count" >/dev/null
fill_ms=$(( ($(date +%s%N) - fill_start) / 1000000 ))
db_mib=$(du -m "$db" | cut -f1)

# One run inside tmux: launch to exit, timed in the pane itself so tmux's own
# start-up is not counted; /usr/bin/time gives the peak RSS.
run_once() {
  local n=$1
  tmux -L "$sock" -f /dev/null new-session -d -x 120 -y 40 -s "run$n" \
    "s=\$(date +%s%N); PORTPREVIEW_TUI_EXIT_AFTER_FIRST_FRAME=1 HOME='$work' PORTPREVIEW_CONFIG=/dev/null \
     /usr/bin/time -f '%M' -o '$work/rss.$n' '$bin/portpreview' --db '$db' tui; rc=\$?; \
     echo \$(( (\$(date +%s%N) - s) / 1000000 )) \$rc > '$work/ms.$n'; tmux -L '$sock' wait-for -S done$n"
  tmux -L "$sock" wait-for "done$n"
}

# A session that only keeps the tmux server up between runs, so a run that
# ends before `wait-for` starts listening cannot take the server with it.
tmux -L "$sock" -f /dev/null new-session -d -s keep "sleep 3600"

# A warm-up run first: the page cache, not the disk, is what a user has.
run_once 0
for n in $(seq 1 "$runs"); do run_once "$n"; done

times=()
for n in $(seq 1 "$runs"); do
  read -r ms rc < "$work/ms.$n"
  [ "$rc" = 0 ] || { echo "run $n: portpreview tui exited $rc" >&2; exit 1; }
  times+=("$ms")
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(echo "$sorted" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
worst=$(echo "$sorted" | tail -1)
rss=$(cat "$work"/rss.[1-9]* | sort -n | tail -1)
verdict=ok
[ "$worst" -lt "$target_ms" ] || verdict=SLOW

printf '\nportpreview tui over %s deliveries (%s MiB database, filled in %s ms; %s build)\n' "$count" "$db_mib" "$fill_ms" "$profile"
printf '%-28s %10s\n' "measure" "value"
printf '%-28s %10s\n' "runs" "$runs"
printf '%-28s %7s ms\n' "first frame, median" "$median"
printf '%-28s %7s ms\n' "first frame, worst" "$worst"
printf '%-28s %7s ms\n' "target" "$target_ms"
printf '%-28s %10s\n' "worst / target" "$(awk -v a="$worst" -v b="$target_ms" 'BEGIN {printf "%.2f", a / b}')"
printf '%-28s %6s KiB\n' "peak RSS" "$rss"
printf '%-28s %10s\n' "verdict" "$verdict"
