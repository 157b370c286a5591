#!/usr/bin/env bash
# Service benchmarks of `roster serve` on the shared 16k-node workload
# (../shared/bench/README.md): whole-process `roster resource ...` timings
# with hyperfine, RPC latencies / drain rates / start-up / journal backlog
# with the `svcbench` driver (crates/svcbench), each next to a same-run
# baseline.  Prints markdown tables; raw hyperfine JSON goes to bench/out/.
# Results are recorded in bench/RESULTS.md (section "Service benchmark results").
#
# Usage: bench/service.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-$(cd .. && pwd)/shared/bench}
[ -f "$SHARED/R16k.json" ] || { echo "bench: workloads not found in $SHARED" >&2; exit 1; }
export ROSTER_BENCH=1
HAVE_HYPERFINE=1
if ! command -v hyperfine >/dev/null; then
  echo "bench: hyperfine is not installed (apt-get install -y hyperfine); skipping the whole-process CLI timings" >&2
  HAVE_HYPERFINE=0
fi
command -v python3 >/dev/null || { echo "bench: needs python3 (drain set)" >&2; exit 1; }

RUNS=20; WARM=3; NRPC=300; ROUNDS=10; SUPRUNS=10
if [ "${1:-}" = "--quick" ]; then RUNS=5; WARM=1; NRPC=50; ROUNDS=2; SUPRUNS=3; fi

nice -n 5 cargo build --release --locked -q
R=$PWD/target/release/roster
SB=$PWD/target/release/svcbench
OUT=$PWD/bench/out
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/roster-svcbench.XXXXXX)
PID=
cleanup() {
  if [ -n "$PID" ]; then kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Workloads: the 30% drain set, configurations, a 100k-event eventlog.
python3 -c 'import random; print(",".join(map(str, sorted(random.Random(42).sample(range(16384), 4915)))))' > "$WORK/drainset.txt"
. bench/lib.sh # start_daemon, stop_daemon, r_config
r_config "$SHARED/R16k.json" "$WORK/roster.toml"
printf '[resource]\nnoverify = true\npath = "%s"\njournal-max = 100000\n' "$SHARED/R16k.json" > "$WORK/roster-j.toml"
"$SB" gen-eventlog --out "$WORK/eventlog-100k" --events 100000 --nodes 16384


hf() { # name command
  [ "$HAVE_HYPERFINE" = 1 ] || return 0
  hyperfine -N --style none --runs "$RUNS" --warmup "$WARM" --export-json "$OUT/svc_$1.json" "$2" >/dev/null
  python3 - "$OUT/svc_$1.json" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print("| %s | %d | %.2f ms | %.2f ms | %.2f ms |" % (sys.argv[2], len(r["times"]), r["median"] * 1e3, min(r["times"]) * 1e3, r["stddev"] * 1e3))
PY
}

cli_suite() { # state label
  echo; echo "### whole process, $2"; echo
  echo "| command | runs | median | min | stddev |"; echo "|---|---|---|---|---|"
  hf "baseline_version_$1" "$R --version"
  hf "status_$1" "$R resource --uri $URI status"
  hf "drain_list_$1" "$R resource --uri $URI drain"
  hf "list_$1" "$R resource --uri $URI list"
  hf "info_$1" "$R resource --uri $URI info"
}

rpc_header() { echo "| measurement | samples | p50 ms | p99 ms | mean ms | note |"; echo "|---|---|---|---|---|---|"; }

rpc_suite() { # label
  echo; echo "### RPC, $1"; echo; rpc_header
  "$SB" rpc --uri "$URI" --topic resource.nosuch --n "$NRPC" --label "baseline: no-op RPC (ENOSYS)"
  "$SB" rpc --uri "$URI" --topic resource.get --n "$NRPC" --label "baseline: resource.get"
  "$SB" rpc --uri "$URI" --topic resource.status --n "$NRPC" --label "resource.status"
  "$SB" concurrent --uri "$URI" --topic resource.sched-status --clients 100 --rounds "$ROUNDS" --label "100 concurrent sched-status"
}

echo "## roster serve benchmarks ($(date -u +%F), $(nproc) cores)"

# A: undrained, then one big 30% drain.
start_daemon A "$WORK/roster.toml"
cli_suite undrained "undrained"
rpc_suite "undrained"
echo; rpc_header
"$SB" drain-big --uri "$URI" --ranks "$WORK/drainset.txt"
cli_suite big "after one 30% drain (4,915 ranks, one RPC)"
rpc_suite "after one 30% drain"
stop_daemon

# B: 4,915 separate drains, one at a time.
start_daemon B "$WORK/roster.toml"
echo; echo "### durable drain RPCs"; echo; rpc_header
"$SB" drains --uri "$URI" --ranks "$WORK/drainset.txt" --clients 1 --label "4,915 separate drains, 1 client (each waits)"
cli_suite separate "after 4,915 separate drains"
rpc_suite "after 4,915 separate drains"
stop_daemon

# C: the same drains from concurrent clients (group commit).
for n in 16 64; do
  start_daemon "C$n" "$WORK/roster.toml"
  echo; rpc_header
  "$SB" drains --uri "$URI" --ranks "$WORK/drainset.txt" --clients "$n" --label "4,915 separate drains, $n concurrent clients"
  stop_daemon
done

# D: start-up on a 100,000-event eventlog; E: journal backlog.
echo; echo "### start-up and journal (100,000-event eventlog, journal-max = 100000)"; echo; rpc_header
"$SB" startup --roster "$R" --config "$WORK/roster-j.toml" --eventlog "$WORK/eventlog-100k" --workdir "$WORK/D" --runs "$SUPRUNS"
start_daemon E "$WORK/roster-j.toml" "$WORK/eventlog-100k"
"$SB" journal --uri "$URI" --runs "$SUPRUNS" --label "journal backlog to sentinel"
stop_daemon
