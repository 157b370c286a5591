#!/usr/bin/env bash
# Issue 27's table in one run: every row as a ratio to its floor, each
# measured next to its floor (alternated, medians of RUNS rounds) on the
# same machine at the same time.  Prints a markdown table; the figures go
# to bench/RESULTS.md.
#
#   row                                   floor
#   status / list, R16k 30 % drained      the process floor: `roster idset count 1`
#   status / list, R131k 30 % drained     the same
#   durable drains, 1 client (rate)       append + fdatasync of one event line
#                                         on the statedir's file system (rate)
#   memory per idle agent session         (bytes of daemon RSS; target < 4 KB)
#
# status/list come from bench/summary.sh when it is there (its lines:
# row<TAB>median_ms<TAB>floor_ms<TAB>ratio); otherwise they are timed here
# the same way (`svcbench alternate`: each command once per round, in
# turn).
#
# Usage: bench/floor.sh      env: RUNS (9), DRAINS (1500 per run),
#        MEMRUNS (RUNS), AGENTS ("2048 16384"), SKIP ("cli drains mem": rows
#        to leave out), BIN (a directory with roster and svcbench to use)
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-$(cd .. && pwd)/shared/bench}
[ -f "$SHARED/R16k.json" ] || { echo "floor: workloads not found in $SHARED" >&2; exit 1; }
command -v python3 >/dev/null || { echo "floor: needs python3 (drain sets)" >&2; exit 1; }
RUNS=${RUNS:-9}
DRAINS=${DRAINS:-1500}
MEMRUNS=${MEMRUNS:-$RUNS}
AGENTS=${AGENTS:-2048 16384}
SKIP=${SKIP:-}
skip() { case " $SKIP " in *" $1 "*) return 0 ;; esac; return 1; }

# BIN=DIR: the roster and svcbench binaries of DIR (e.g. a copy of an
# earlier build, for a before/after in one run); else a release build.
if [ -n "${BIN:-}" ]; then
  R=$BIN/roster SB=$BIN/svcbench
else
  nice -n 5 cargo build --release --locked -q -p roster -p roster-svcbench
  R=$PWD/target/release/roster SB=$PWD/target/release/svcbench
fi
. bench/lib.sh # start_daemon, stop_daemon, r_config, rss_mb, now, elapsed, scratch
scratch floor


ROWS=()
row() { ROWS+=("| $1 | $2 | $3 | $4 | $5 |"); } # work, measured, floor, ratio, target

# --- status / list vs the process floor --------------------------------
cli_rows() {
  if [ -f bench/summary.sh ]; then
    # That bench's rows, its method (same floor, alternated medians).
    local before=${#ROWS[@]}
    while IFS=$'\t' read -r name med flo ratio; do
      [ -n "$ratio" ] || continue
      case "$name" in
        *status*R16k* | *R16k*status*) t="≤ 2.5×" ;;
        *list*R16k* | *R16k*list*) t="≤ 4×" ;;
        *status*) t="≤ 10×" ;;
        *list*) t="≤ 20×" ;;
        *) t="" ;;
      esac
      row "$name" "$med ms" "$flo ms" "${ratio}×" "$t"
    done < <(RUNS=$RUNS bash bench/summary.sh 2>/dev/null | grep -P '^[^\t|]+\t[0-9.]+\t[0-9.]+\t[0-9.]+' || true)
    [ "${#ROWS[@]}" -gt "$before" ] && return
    echo "floor: bench/summary.sh gave no rows; timing status/list here" >&2
  fi
  python3 -c 'import random; print(",".join(map(str, sorted(random.Random(42).sample(range(16384), 4915)))))' >"$WORK/drain16k.txt"
  python3 -c 'import random; print(",".join(map(str, sorted(random.Random(42).sample(range(131072), 39321)))))' >"$WORK/drain131k.txt"
  "$R" R encode --ranks=0-131071 --cores=0-63 --gpus=0-3 --hosts='node[000001-131072]' >"$WORK/R131k.json"
  r_config "$SHARED/R16k.json" "$WORK/r16k.toml"
  r_config "$WORK/R131k.json" "$WORK/r131k.toml"
  start_daemon r16k "$WORK/r16k.toml"
  local pid16=$PID u16=$URI
  "$SB" drain-big --uri "$URI" --ranks "$WORK/drain16k.txt" >/dev/null
  start_daemon r131k "$WORK/r131k.toml"
  local pid131=$PID u131=$URI
  "$SB" drain-big --uri "$URI" --ranks "$WORK/drain131k.txt" >/dev/null
  local out
  out=$("$SB" alternate "$RUNS" \
    floor "$R idset count 1" \
    status16 "$R resource --uri $u16 status" \
    list16 "$R resource --uri $u16 list" \
    status131 "$R resource --uri $u131 status" \
    list131 "$R resource --uri $u131 list")
  local floor
  floor=$(awk -F'\t' '$1 == "floor" {print $2}' <<<"$out")
  cli() { # key label target
    local m
    m=$(awk -F'\t' -v k="$1" '$1 == k {print $2}' <<<"$out")
    case "$m" in
      failed*) row "$2" "**$m**" "$floor ms" "—" "$3" ;;
      *) row "$2" "$m ms" "$floor ms" "$(awk -v a="$m" -v b="$floor" 'BEGIN{printf "%.1f×", a / b}')" "$3" ;;
    esac
  }
  cli status16 '`roster resource status`, R16k, 30 % drained' "≤ 2.5×"
  cli list16 '`roster resource list`, R16k, 30 % drained' "≤ 4×"
  cli status131 '`roster resource status`, R131k, 30 % drained' "≤ 10×"
  cli list131 '`roster resource list`, R131k, 30 % drained' "≤ 20×"
  PID=$pid16; stop_daemon
  PID=$pid131; stop_daemon
}

# --- durable drains, one client, vs append + fdatasync ------------------
drain_rows() {
  r_config "$SHARED/R16k.json" "$WORK/drains.toml"
  start_daemon drains "$WORK/drains.toml"
  local dir=$WORK/drains/state i d f
  # RUNS disjoint sets of DRAINS ranks (each rank drained once).
  python3 - "$WORK" "$RUNS" "$DRAINS" <<'PY'
import random, sys
work, runs, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ranks = random.Random(7).sample(range(16384), min(16384, runs * n))
for i in range(runs):
    open(f"{work}/drains{i}.txt", "w").write(",".join(map(str, ranks[i * n:(i + 1) * n])))
PY
  local rates=() floors=() rooms=() r
  # Each round: the append floor (the issue's), the drains, and the floor
  # of the I/O the service does (a line into preallocated room).
  for i in $(seq 0 $((RUNS - 1))); do
    f=$("$SB" fsync --dir "$dir" --n "$DRAINS" | grep -o '[0-9]*/s overall' | cut -d/ -f1)
    d=$("$SB" drains --uri "$URI" --ranks "$WORK/drains$i.txt" --clients 1 | grep -o '[0-9]*/s overall' | cut -d/ -f1)
    r=$("$SB" fsync --dir "$dir" --n "$DRAINS" --room 1 | grep -o '[0-9]*/s overall' | cut -d/ -f1)
    floors+=("$f"); rates+=("$d"); rooms+=("$r")
  done
  stop_daemon
  local md mf mr
  md=$(printf '%s\n' "${rates[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
  mf=$(printf '%s\n' "${floors[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
  mr=$(printf '%s\n' "${rooms[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
  row "sequential durable drains, 1 client (\`svcbench drains\`, $DRAINS a run)" "$md/s" "$mf/s (append + fdatasync, statedir)" \
    "$(awk -v a="$md" -v b="$mf" 'BEGIN{printf "%.0f %%", 100 * a / b}')" "≥ 75 %"
  row "the same drains against their own I/O's floor (not a target)" "$md/s" "$mr/s (line into preallocated room + fdatasync)" \
    "$(awk -v a="$md" -v b="$mr" 'BEGIN{printf "%.0f %%", 100 * a / b}')" "—"
}

# --- memory per idle agent session -------------------------------------
mem_row() { # N
  local n=$1 last=$(($1 - 1)) per=() i base with sim
  printf '[resource]\ntorpid-max = "30s"\noffline-timeout = "120s"\n[[resource.config]]\nhosts = "sim[0-%d]"\ncores = "0-3"\n' "$last" >"$WORK/agents$n.toml"
  for i in $(seq 1 "$MEMRUNS"); do
    rm -rf "$WORK/agents$n"
    start_daemon "agents$n" "$WORK/agents$n.toml"
    sleep 1
    base=$(awk '/VmRSS/ {print $2}' "/proc/$PID/status")
    "$R" agent --uri "$URI" --simulate "sim[0-$last]" --cores 0-3 --heartbeat 2 2>"$WORK/sim.log" &
    sim=$!
    PIDS+=("$sim")
    for _ in $(seq 1 1200); do
      [ "$("$R" resource --uri "$URI" status -s online -no '{ranks}' 2>/dev/null | tr -d '\n')" = "0-$last" ] && break
      sleep 0.1
    done
    sleep 8
    with=$(awk '/VmRSS/ {print $2}' "/proc/$PID/status")
    per+=("$(awk -v a="$with" -v b="$base" -v n="$n" 'BEGIN{printf "%.2f", (a - b) * 1024 / n / 1000}')")
    kill -9 "$sim" 2>/dev/null || true
    wait "$sim" 2>/dev/null || true
    stop_daemon
  done
  local m
  m=$(printf '%s\n' "${per[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
  row "memory per idle agent session, $n agents (daemon RSS with − without, / $n)" "$m KB" "—" "—" "< 4 KB"
}

echo "## bench/floor.sh ($(date -u '+%F %H:%M') UTC, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(git rev-parse --short HEAD))"
echo
skip cli || cli_rows
skip drains || drain_rows
if ! skip mem; then for n in $AGENTS; do mem_row "$n"; done; fi
echo "| work | measured (median) | floor (median, same run) | ratio | target |"
echo "| --- | --- | --- | --- | --- |"
printf '%s\n' "${ROWS[@]}"
echo
echo "Medians of $RUNS alternated rounds (memory: $MEMRUNS runs); load at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
