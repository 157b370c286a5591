#!/usr/bin/env bash
# TLS benchmark of roster serve, with a same-run plain baseline:
#   1. 16,384 simulated agents (`roster agent --simulate`, one shared TLS
#      client configuration, the owner token over TLS) until all are
#      online, then the service's CPU in steady state (heartbeat 2 s);
#      the same over the plain Unix socket (the baseline).
#   2. resource.status round trips on one warm connection: over TLS, over
#      loopback tcp:// and over the Unix socket (svcbench warm).
# Usage: bench/tls.sh [N]          (env: HB, STEADY, NRPC)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-16384}
HB=${HB:-2}
STEADY=${STEADY:-10}
NRPC=${NRPC:-2000}
cargo build --release --locked -q -p roster -p roster-svcbench
R=$PWD/target/release/roster
SB=$PWD/target/release/svcbench
T=$(mktemp -d /tmp/roster-tls-bench.XXXXXX)
SRV= SIM=
cleanup() { kill -9 ${SIM:-} ${SRV:-} 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
exec 3>&2 2>/dev/null
LAST=$((N - 1))
PORT=$((20000 + RANDOM % 20000))
PLAIN=$((PORT + 1))

"$R" serve ca init "$T/ca" >/dev/null
"$R" serve ca issue "$T/ca" localhost --san 127.0.0.1 >/dev/null
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/token"
chmod 600 "$T/token"
cat >"$T/roster.toml" <<CFG
[resource]
torpid-max = "5s"
offline-timeout = "120s"
[[resource.config]]
hosts = "sim[0-$LAST]"
cores = "0-3"
[serve]
listen = ["unix://$T/roster.sock", "tls://127.0.0.1:$PORT", "tcp://127.0.0.1:$PLAIN"]
token-file = "$T/token"
tls-cert = "$T/ca/localhost.pem"
tls-key = "$T/ca/localhost.key"
tls-client-ca = "$T/ca/ca.pem"
CFG
export ROSTER_CA=$T/ca/ca.pem
now() { date +%s.%N; }
elapsed() { echo "$1 $2" | awk '{printf "%.3f", $2 - $1}'; }
q() { "$R" resource --uri "unix://$T/roster.sock" status -s online -no '{ranks}' 2>/dev/null | tr -d '\n'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)

start() {
    rm -rf "$T/state"; mkdir -p "$T/state"
    "$R" serve --config "$T/roster.toml" --statedir "$T/state" 2>"$T/serve-$1.log" &
    SRV=$!
    for _ in $(seq 200); do q >/dev/null && [ -S "$T/roster.sock" ] && break; sleep 0.05; done
}
stop() { kill -TERM $SRV; wait $SRV 2>/dev/null || true; SRV=; }

agents() { # LABEL URI
    start "$1"
    local t0 t1 s0 s1 a0 a1 w0 w1
    t0=$(now)
    "$R" agent --uri "$2" --token-file "$T/token" --simulate "sim[0-$LAST]" --cores 0-3 \
        --heartbeat "$HB" 2>"$T/sim-$1.log" &
    SIM=$!
    while [ "$(q)" != "0-$LAST" ]; do
        if awk -v a="$(now)" -v b="$t0" 'BEGIN{exit !(a - b > 60)}'; then
            echo "$1: timeout; online: $(q)" >&3; tail -3 "$T/sim-$1.log" >&3; return 1
        fi
        sleep 0.05
    done
    t1=$(now)
    sleep 3
    s0=$(cpu_ticks $SRV); a0=$(cpu_ticks $SIM); w0=$(now)
    sleep "$STEADY"
    s1=$(cpu_ticks $SRV); a1=$(cpu_ticks $SIM); w1=$(now)
    local wall
    wall=$(elapsed "$w0" "$w1")
    printf '| %s | %s | %s %% | %s %% | %s MB |\n' "$1" "$(elapsed "$t0" "$t1")" \
        "$(awk -v d=$((s1 - s0)) -v hz="$HZ" -v w="$wall" 'BEGIN{printf "%.1f", 100 * d / hz / w}')" \
        "$(awk -v d=$((a1 - a0)) -v hz="$HZ" -v w="$wall" 'BEGIN{printf "%.1f", 100 * d / hz / w}')" \
        "$(awk '/VmRSS/ {printf "%.0f", $2 / 1024}' /proc/$SRV/status)"
    kill -TERM $SIM; wait $SIM 2>/dev/null || true; SIM=
    stop
}

echo "machine: $(nproc) CPUs, $(uname -sr), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| $N agents over | all online | service CPU (steady) | simulator CPU | service RSS |"
echo "| --- | --- | --- | --- | --- |"
agents "tls://" "tls://localhost:$PORT"
agents "unix:// (baseline)" "unix://$T/roster.sock"
echo
start rpc
echo "| resource.status, one warm connection | n | p50 ms | p99 ms | mean ms | note |"
echo "| --- | --- | --- | --- | --- | --- |"
"$SB" warm --uri "tls://localhost:$PORT" --ca "$T/ca/ca.pem" --token-file "$T/token" --n "$NRPC" --label "tls:// ($N nodes)"
"$SB" warm --uri "tcp://127.0.0.1:$PLAIN" --token-file "$T/token" --n "$NRPC" --label "tcp:// loopback (baseline)"
"$SB" warm --uri "unix://$T/roster.sock" --n "$NRPC" --label "unix:// (baseline)"
stop
