#!/usr/bin/env bash
# Flood benchmark (issue 10, "bounded everything"): one `roster serve`
# (release build) with N simulated agents online (default 16,384, one
# Unix-socket session each, heartbeat 2 s, torpid-max 10 s), then for DUR
# seconds (default 300):
#   * 100 clients doing `resource.sched-status` (svcbench rounds of 100
#     callers at once, back to back);
#   * a journal follower that opens its stream and stops reading;
#   * a guest (uid nobody) pipelining `resource.status` on the Flux
#     listener without reading a reply, reconnecting whenever dropped;
#   * a well-behaved client timing `resource.status` (svcbench rpc, 500
#     sequential calls every ~20 s).
# The Python loads (journal, guest) are started 2 s before the flood and
# wait for its start, so that their interpreters' start-up on these 2
# cores is not counted as the flood; every load and the measured client
# then start at one moment (PRESTART=0: start them all at the flood's
# start, as before).
# Baseline: the same daemon and agents for BASE seconds (default 60)
# before the flood, with the well-behaved client only.
# Reports: daemon RSS (baseline mean / flood peak / end), status p99,
# torpid/offline events, whether the daemon still answers.
# Usage: bench/flood.sh   (env: N, DUR, BASE; ROSTER=path of another roster
# binary to measure (a baseline build); GUEST=0 / SCHED=0 / JOURNAL=0
# leave that load out, to see what each costs; GEN_NICE=N runs the load
# generators -- simulator, guest, journal, sched-status clients -- at nice N,
# a stand-in for their being on other hosts: they share this machine's
# 2 cores with the daemon and the measured client); PROBE_NICE=N runs the
# measured client at nice N (e.g. -10: how much of its tail is its own
# wait for a CPU); SCHED_KEEPALIVE=1: each sched-status caller keeps one
# connection (as a scheduler keeps its handle) instead of one per call;
# ISOLATE=1 starts the daemon, each load generator and the measured client
# each in its own session (setsid), as separate programs are on a real
# machine (a service, a scheduler, an admin's login), so the kernel's
# autogroups share the CPUs between them instead of between threads;
# PROBE_PACE=MS: the measured client starts a call every MS ms (a client
# that polls) instead of back to back, so its calls land at random points
# of the load rather than just after its last reply
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-16384}
DUR=${DUR:-300}
BASE=${BASE:-60}
[ "$(id -u)" = 0 ] || { echo "flood.sh: run as root (the guest flood runs as nobody)" >&2; exit 1; }
command -v setpriv >/dev/null || { echo "flood.sh: needs setpriv (util-linux)" >&2; exit 1; }
nice -n 5 cargo build --release --locked -q -p roster -p roster-svcbench
R=${ROSTER:-$PWD/target/release/roster}
SB=$PWD/target/release/svcbench
T=$(mktemp -d /tmp/roster-flood.XXXXXX)
chmod 755 "$T"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}" ${SRV:-}; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || true
LAST=$((N - 1))
mkdir -p "$T/state"
cat >"$T/roster.toml" <<CFG
[resource]
torpid-max = "10s"
offline-timeout = "60s"
[[resource.config]]
hosts = "sim[0-$LAST]"
cores = "0-3"
CFG
URI=unix://$T/roster.sock
FLUX=$T/flux.sock
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
q() { "$R" resource --uri "$URI" status -s "$1" -no '{ranks}' 2>/dev/null | tr -d '\n'; }
# p99 of 500 sequential status calls (the whole row is kept in probe.rows)
SS=(); [ "${ISOLATE:-0}" = 1 ] && SS=(setsid)
p99() { "${SS[@]}" nice -n "${PROBE_NICE:-0}" "$SB" rpc --uri "$URI" --topic resource.status --n 500 --warmup 20 --pace "${PROBE_PACE:-0}" | tee -a "$T/probe.rows" | awk -F'|' '{gsub(/ /,"",$5); print $5}'; }

"${SS[@]}" "$R" serve --config "$T/roster.toml" --statedir "$T/state" --listen "$URI" --listen "flux://$FLUX" 2>"$T/serve.log" &
SRV=$!
for _ in $(seq 200); do "$R" resource --uri "$URI" status >/dev/null 2>&1 && break; sleep 0.05; done
G=("${SS[@]}" nice -n "${GEN_NICE:-0}")
"${G[@]}" "$R" agent --uri "$URI" --simulate "sim[0-$LAST]" --cores 0-3 --heartbeat 2 2>"$T/sim.log" &
PIDS+=($!)
for _ in $(seq 600); do [ "$(q online)" = "0-$LAST" ] && break; sleep 0.1; done
[ "$(q online)" = "0-$LAST" ] || { echo "agents did not come online: $(q online)" >&2; exit 1; }
echo "machine: $(nproc) CPUs, $(uname -sr), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$N agents online; baseline for $BASE s"

sample() { # seconds file
  local end=$(( $(date +%s) + $1 ))
  while [ "$(date +%s)" -lt "$end" ]; do rss_kb "$SRV" >>"$2"; sleep 1; done
}
sleep 5
sample "$BASE" "$T/rss-base" &
SP=$!
BP99=$(p99)
wait $SP
BASE_MEAN=$(awk '{s+=$1} END {printf "%.0f", s/NR/1024}' "$T/rss-base")
BASE_MAX=$(awk 'm<$1{m=$1} END {printf "%.0f", m/1024}' "$T/rss-base")
echo "baseline: RSS mean $BASE_MEAN MB, max $BASE_MAX MB; resource.status p99 $BP99 ms"

echo "flood for $DUR s"
JP= GP= CP=
SA=(); START_AT=$(date +%s)
if [ "${PRESTART:-1}" = 1 ]; then START_AT=$(( $(date +%s) + 2 )); SA=("$START_AT"); fi
until_start() { while [ "$(date +%s)" -lt "$START_AT" ]; do sleep 0.02; done; }
: >"$T/journal.out"; : >"$T/guest.out"; : >"$T/sched.out"
if [ "${JOURNAL:-1}" = 1 ]; then
  "${G[@]}" python3 bench/flood.py stalled-journal "$T/roster.sock" "$DUR" "${SA[@]}" >"$T/journal.out" 2>&1 &
  PIDS+=($!); JP=$!
fi
if [ "${GUEST:-1}" = 1 ]; then
  "${G[@]}" setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 bench/flood.py guest-flood "$FLUX" "$DUR" "${SA[@]}" >"$T/guest.out" 2>&1 &
  PIDS+=($!); GP=$!
fi
if [ "${SCHED:-1}" = 1 ]; then
  ( until_start; end=$(( $(date +%s) + DUR )); while [ "$(date +%s)" -lt "$end" ]; do
      "${G[@]}" "$SB" concurrent --uri "$URI" --topic resource.sched-status --clients 100 --rounds 20 --keepalive "${SCHED_KEEPALIVE:-0}" >>"$T/sched.out" 2>&1 || echo "sched-status round failed" >>"$T/sched.out"
    done ) &
  PIDS+=($!); CP=$!
fi
until_start
sample "$DUR" "$T/rss-flood" &
SP=$!
P99S=()
END=$(( $(date +%s) + DUR - 15 ))
while [ "$(date +%s)" -lt "$END" ]; do
  P99S+=("$(p99 || echo FAIL)")
  sleep 15
done
wait $SP
wait $JP $GP $CP 2>/dev/null || true
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
FLOOD_MAX=$(awk 'm<$1{m=$1} END {printf "%.0f", m/1024}' "$T/rss-flood")
FLOOD_MEAN=$(awk '{s+=$1} END {printf "%.0f", s/NR/1024}' "$T/rss-flood")
END_RSS=$(( $(rss_kb "$SRV") / 1024 ))
WORST=$(printf '%s\n' "${P99S[@]}" | sort -g | tail -1)
echo "flood: RSS mean $FLOOD_MEAN MB, peak $FLOOD_MAX MB (baseline mean + $((FLOOD_MAX - BASE_MEAN)) MB), at the end $END_RSS MB"
echo "resource.status p99 during the flood (ms, every ~20 s): ${P99S[*]}; worst $WORST"
echo "resource.status p50 during the flood (ms): $(tail -n +2 "$T/probe.rows" | awk -F'|' '{gsub(/ /,"",$4); printf "%s ", $4}')"
echo "sched-status rounds: $(grep -c '^|' "$T/sched.out" || true) ok, $(grep -c failed "$T/sched.out" || true) failed; last: $(grep '^|' "$T/sched.out" | tail -1)"
cat "$T/guest.out" "$T/journal.out"
kill -0 "$SRV" && echo "daemon alive: yes; status answers: $("$R" resource --uri "$URI" status >/dev/null 2>&1 && echo yes || echo NO)"
echo "torpid now: '$(q torpid)', offline now: '$(q offline)'"
echo "events: $("$R" resource --uri "$URI" eventlog | awk '{print $2}' | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
echo "daemon warnings: $(grep -c WARN "$T/serve.log" || true) (first kinds:)"
grep WARN "$T/serve.log" | sed 's/.*WARN[^:]*: //' | cut -c1-100 | sort | uniq -c | sort -rn | head -5
