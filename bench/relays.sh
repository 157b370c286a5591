#!/usr/bin/env bash
# Agent relays at scale (issue 15): one roster serve (release build) and
# the simulator's relay tree, split in two processes so that one relay can
# be killed: process A runs every host except the subtree of rank 1 (its
# first RELAYS hosts are relays, the rest virtual leaves), process B runs
# the relay at rank 1 with its subtree as virtual leaves.  kary:FANOUT.
# Measures, on the service side:
#   1. time until every node is online (from the simulators' start);
#   2. service CPU and RSS in steady state; fds of the processes;
#   3. 100 stalled leaves: time from the stall until exactly they are torpid;
#   4. kill -9 of process B (the relay at rank 1): time until exactly its
#      subtree is offline; restart: time until all are online again;
#   5. `roster resource status` whole-process time at this size.
# Every process runs with `ulimit -n 20000`.
# Usage: bench/relays.sh [N]   (env: FANOUT, RELAYS, TORPID, STEADY)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-131072}
FANOUT=${FANOUT:-128}
RELAYS=${RELAYS:-128}
TORPID=${TORPID:-5}
STEADY=${STEADY:-8}
ulimit -n 20000
cargo build --release --locked -p roster >/dev/null 2>&1 || cargo build --release -p roster
R=$PWD/target/release/roster
T=$(mktemp -d /tmp/roster-relays-bench.XXXXXX)
trap 'kill -9 ${SIMA:-} ${SIMB:-} ${SRV:-} 2>/dev/null || true; mkdir -p /tmp/roster-relays-bench-logs; cp "$T"/*.log /tmp/roster-relays-bench-logs/ 2>/dev/null; rm -rf "$T"' EXIT
exec 3>&2 2>/dev/null
mkdir -p "$T/state"
LAST=$((N - 1))
# The subtree of rank 1 (and rank 1), and the rest, as hostlists.
read -r SUB REST STALL < <(python3 - "$N" "$FANOUT" <<'PY'
import sys
n, k = int(sys.argv[1]), int(sys.argv[2])
rng = [(1, 1)]
lo = hi = 1
while True:
    lo, hi = lo * k + 1, hi * k + k
    if lo >= n:
        break
    rng.append((lo, min(hi, n - 1)))
def fmt(rs):
    return "sim[" + ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in rs) + "]"
rest, cur = [], 0
for a, b in rng:
    if cur < a:
        rest.append((cur, a - 1))
    cur = b + 1
if cur <= n - 1:
    rest.append((cur, n - 1))
# 100 leaves of process A, past its relays.
a = [x for a, b in rest for x in range(a, b + 1)][max(1000, k + 1) % max(1, n):][:100]
print(fmt(rng), fmt(rest), f"{a[0]}-{a[-1]}" if a and a[-1] - a[0] == 99 else "")
PY
)
cat >"$T/roster.toml" <<CFG
[resource]
torpid-max = "${TORPID}s"
offline-timeout = "120s"
[serve]
relay-fanout = $FANOUT
[[resource.config]]
hosts = "sim[0-$LAST]"
cores = "0-3"
CFG
URI=unix://$T/roster.sock
. bench/lib.sh   # now, elapsed, q, wait_for, cpu_ticks, rss_mb
fds() { ls "/proc/$1/fd" | wc -l; }
HZ=$(getconf CLK_TCK)

"$R" serve --config "$T/roster.toml" --statedir "$T/state" --listen "$URI" 2>"$T/serve.log" &
SRV=$!
for _ in $(seq 400); do [ -S "$T/roster.sock" ] && "$R" resource --uri "$URI" status >/dev/null 2>&1 && break; sleep 0.05; done
echo "N=$N kary:$FANOUT; process A: $REST ($RELAYS relays); process B: relay $SUB"

STALL_AT=$((STEADY + 15))
T0=$(now)
"$R" agent --uri "$URI" --simulate "$REST" --relays "$RELAYS" --cores 0-3 \
    --stall "$STALL" --stall-after "$STALL_AT" 2>"$T/simA.log" &
SIMA=$!
"$R" agent --uri "$URI" --simulate "$SUB" --relays 1 --cores 0-3 2>"$T/simB.log" &
SIMB=$!
T1=$(wait_for online "0-$LAST" 60)
echo "all $N online after $(elapsed "$T0" "$T1") s"

sleep 3
s0=$(cpu_ticks $SRV); a0=$(cpu_ticks $SIMA); w0=$(now)
sleep "$STEADY"
s1=$(cpu_ticks $SRV); a1=$(cpu_ticks $SIMA); w1=$(now)
WALL=$(elapsed "$w0" "$w1")
pct() { awk -v d="$1" -v hz="$HZ" -v w="$WALL" 'BEGIN{printf "%.1f", 100 * d / hz / w}'; }
echo "steady state: service $(pct $((s1 - s0)))% of one core, RSS $(rss_mb $SRV) MB, $(fds $SRV) fds; simulator A $(pct $((a1 - a0)))%, RSS $(rss_mb $SIMA) MB, $(fds $SIMA) fds; B $(fds $SIMB) fds"
[ -z "$(q torpid)" ] || echo "WARNING: torpid before the stall: $(q torpid)"

STALL_T=$(echo "$T0 $STALL_AT" | awk '{printf "%.6f", $1 + $2}')
T2=$(wait_for torpid "$STALL" $((STALL_AT + TORPID + 20)))
echo "100 stalled leaves ($STALL) torpid $(elapsed "$STALL_T" "$T2") s after the stall (torpid-max ${TORPID} s)"

SUBIDS=$(echo "$SUB" | sed 's/^sim\[\(.*\)\]$/\1/')
T3=$(now)
kill -9 $SIMB
wait $SIMB 2>/dev/null || true
T4=$(wait_for offline "$SUBIDS" 30)
echo "kill -9 of the relay at rank 1: exactly $SUBIDS offline after $(elapsed "$T3" "$T4") s"
T5=$(now)
"$R" agent --uri "$URI" --simulate "$SUB" --relays 1 --cores 0-3 2>"$T/simB2.log" &
SIMB=$!
T6=$(wait_for online "0-$LAST" 30)
echo "relay restarted: all online again after $(elapsed "$T5" "$T6") s"

best=999; sum=0
for i in $(seq 10); do
    a=$(now); "$R" resource --uri "$URI" status >/dev/null; b=$(now)
    e=$(elapsed "$a" "$b"); sum=$(echo "$sum $e" | awk '{print $1 + $2}')
    best=$(echo "$best $e" | awk '{print ($2 < $1) ? $2 : $1}')
done
echo "roster resource status at $N nodes: mean $(echo "$sum" | awk '{printf "%.1f", $1 * 100}') ms, best $(echo "$best" | awk '{printf "%.1f", $1 * 1000}') ms (10 runs, whole process)"
echo "events: $("$R" resource --uri "$URI" eventlog | awk '{print $2}' | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
grep -m3 -i "error\|warn" "$T/serve.log" || true
grep -m3 -i "refused\|error" "$T/simA.log" "$T/simB.log" 2>/dev/null || true
kill -TERM $SRV
wait $SRV 2>/dev/null || true
SRV=
