#!/usr/bin/env bash
# Scale benchmark of agent liveness: one roster serve (release build) and
# one `roster agent --simulate` process with N virtual agents (default
# 16384) heartbeating every 2 s.  Measures, on the service side:
#   1. time until every agent is online (from the simulator's start);
#   2. CPU of the service (and of the simulator) in steady state;
#   3. after STALL_AT s, 100 agents stop heartbeating: time from the stall
#      until exactly those are torpid (torpid-max = TORPID s);
#   4. kill -9 of the simulator: time until every target is offline.
# Usage: bench/agents.sh [N]
# With SIDE_BY_SIDE=1, bench/relays.sh N follows in the same run: the
# same N nodes through relays (issue 15).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-16384}
TORPID=${TORPID:-5}
HB=${HB:-2}
STEADY=${STEADY:-10}
cargo build --release --locked -p roster >/dev/null 2>&1 || cargo build --release -p roster
R=$PWD/target/release/roster
T=$(mktemp -d /tmp/roster-agents-bench.XXXXXX)
trap 'kill -9 ${SIM:-} ${SRV:-} 2>/dev/null || true; rm -rf "$T"' EXIT
exec 3>&2 2>/dev/null  # no "Killed" job notices; errors go to fd 3
mkdir -p "$T/state"
LAST=$((N - 1))
cat >"$T/roster.toml" <<CFG
[resource]
torpid-max = "${TORPID}s"
offline-timeout = "120s"
[[resource.config]]
hosts = "sim[0-$LAST]"
cores = "0-3"
CFG
URI=unix://$T/roster.sock
. bench/lib.sh   # now, elapsed, q, wait_for, cpu_ticks, rss_mb
HZ=$(getconf CLK_TCK)

"$R" serve --config "$T/roster.toml" --statedir "$T/state" --listen "$URI" 2>"$T/serve.log" &
SRV=$!
for _ in $(seq 200); do [ -S "$T/roster.sock" ] && "$R" resource --uri "$URI" status >/dev/null 2>&1 && break; sleep 0.05; done

# Stall the first 100 ranks after the steady-state measurement.
STALL_AT=$((STEADY + 15))
T0=$(now)
"$R" agent --uri "$URI" --simulate "sim[0-$LAST]" --cores 0-3 --heartbeat "$HB" \
    --stall 0-99 --stall-after "$STALL_AT" 2>"$T/sim.log" &
SIM=$!
T1=$(wait_for online "0-$LAST" 60)
JOIN=$(elapsed "$T0" "$T1")
echo "all $N online after $JOIN s"

sleep 3
s0=$(cpu_ticks $SRV); a0=$(cpu_ticks $SIM); w0=$(now)
sleep "$STEADY"
s1=$(cpu_ticks $SRV); a1=$(cpu_ticks $SIM); w1=$(now)
WALL=$(elapsed "$w0" "$w1")
SCPU=$(awk -v d=$((s1 - s0)) -v hz="$HZ" -v w="$WALL" 'BEGIN{printf "%.1f", 100 * d / hz / w}')
ACPU=$(awk -v d=$((a1 - a0)) -v hz="$HZ" -v w="$WALL" 'BEGIN{printf "%.1f", 100 * d / hz / w}')
echo "steady state: service ${SCPU}% of one core, simulator ${ACPU}%, service RSS $(rss_mb $SRV) MB"
[ -z "$(q torpid)" ] || echo "WARNING: torpid before the stall: $(q torpid)"

STALL_T=$(echo "$T0 $STALL_AT" | awk '{printf "%.6f", $1 + $2}')
T2=$(wait_for torpid "0-99" $((STALL_AT + TORPID + 20)))
TORPID_T=$(elapsed "$STALL_T" "$T2")
echo "100 stalled agents torpid $TORPID_T s after the stall (torpid-max ${TORPID} s)"
sleep 1
[ "$(q torpid)" = "0-99" ] || echo "WARNING: torpid is now $(q torpid)"

T3=$(now)
kill -9 $SIM
wait $SIM 2>/dev/null || true
T4=$(wait_for offline "0-$LAST" 30)
OFF=$(elapsed "$T3" "$T4")
echo "kill -9 of the simulator: all offline after $OFF s"
echo "events: $("$R" resource --uri "$URI" eventlog | awk '{print $2}' | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
grep -m3 -i "error\|warn" "$T/serve.log" || true
kill -TERM $SRV
wait $SRV 2>/dev/null || true
SRV=
if [ "${SIDE_BY_SIDE:-0}" = 1 ]; then
    echo "--- the same $N nodes through relays ---"
    bash bench/relays.sh "$N"
fi
