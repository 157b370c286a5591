#!/usr/bin/env bash
# TLS benchmark of roster serve, with same-run plain baselines:
#   1. N simulated agents (`roster agent --simulate`: one shared TLS
#      client configuration, a full handshake each, the owner token
#      over TLS) until all are
#      online, then the service's CPU in steady state (heartbeat $HB s)
#      and its RSS; the same over plain loopback tcp:// and over the Unix
#      socket (the baselines).
#   2. resource.status round trips on one warm connection (svcbench warm):
#      over TLS, over loopback tcp:// and over the Unix socket.
#   3. `roster resource status` as a whole process (hyperfine: connect,
#      handshake, one call, render): over TLS and over the Unix socket.
#   The join is also given in CPU seconds (service, simulator): on a
#   shared machine they vary much less than the wall time.
# Usage: bench/tls.sh [N]          (env: HB, STEADY, NRPC, RUNS, JOIN_TIMEOUT)
# Keeps to a couple of minutes at N=16384 on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-16384}
HB=${HB:-2}
STEADY=${STEADY:-10}
NRPC=${NRPC:-2000}
RUNS=${RUNS:-30}
JOIN_TIMEOUT=${JOIN_TIMEOUT:-120}
cargo build --release --locked -q -p roster -p roster-svcbench
R=$PWD/target/release/roster
SB=$PWD/target/release/svcbench
T=$(mktemp -d /tmp/roster-tls-bench.XXXXXX)
SRV= SIM=
cleanup() { kill -9 ${SIM:-} ${SRV:-} 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
exec 3>&2 2>/dev/null
LAST=$((N - 1))
# Below the ephemeral range (32768-60999), which 16k client sockets fill.
PORT=$((20000 + RANDOM % 12000))
PLAIN=$((PORT + 1))

"$R" serve ca init "$T/ca" >/dev/null
"$R" serve ca issue "$T/ca" localhost --san 127.0.0.1 >/dev/null
"$R" serve ca issue "$T/ca" ops --role user >/dev/null
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
# A label as a file name ("tls://" would name a directory).
file() { echo "$1" | tr -c 'A-Za-z0-9\n' '_'; }

start() {
    local log
    log="$T/serve-$(file "$1").log"
    rm -rf "$T/state"; mkdir -p "$T/state"
    "$R" serve --config "$T/roster.toml" --statedir "$T/state" 2>"$log" &
    SRV=$!
    for _ in $(seq 200); do
        [ -S "$T/roster.sock" ] && q >/dev/null && return 0
        sleep 0.05
    done
    echo "roster serve did not start:" >&3; tail -5 "$log" >&3; exit 1
}
stop() { kill -TERM $SRV; wait $SRV 2>/dev/null || true; SRV=; }

agents() { # LABEL URI
    start "$1"
    local t0 t1 s0 s1 a0 a1 w0 w1 log
    log="$T/sim-$(file "$1").log"
    t0=$(now)
    "$R" agent --uri "$2" --token-file "$T/token" --simulate "sim[0-$LAST]" --cores 0-3 \
        --heartbeat "$HB" 2>"$log" &
    SIM=$!
    sleep 0.05
    while [ "$(q)" != "0-$LAST" ]; do
        if awk -v a="$(now)" -v b="$t0" -v t="$JOIN_TIMEOUT" 'BEGIN{exit !(a - b > t)}'; then
            echo "$1: timeout; online: $(q)" >&3; tail -3 "$log" >&3; return 1
        fi
        sleep 0.05
    done
    t1=$(now)
    # CPU seconds the join took (less sensitive to a shared machine than
    # the wall time).
    local js jsim
    js=$(awk -v t="$(cpu_ticks $SRV)" -v hz="$HZ" 'BEGIN{printf "%.1f", t / hz}')
    jsim=$(awk -v t="$(cpu_ticks $SIM)" -v hz="$HZ" 'BEGIN{printf "%.1f", t / hz}')
    sleep 3
    s0=$(cpu_ticks $SRV); a0=$(cpu_ticks $SIM); w0=$(now)
    sleep "$STEADY"
    s1=$(cpu_ticks $SRV); a1=$(cpu_ticks $SIM); w1=$(now)
    local wall
    wall=$(elapsed "$w0" "$w1")
    printf '| %s | %s s | %s s | %s s | %s s | %s %% | %s %% | %s MB |\n' "$1" \
        "$(sed -n 's/.*all [0-9]* agents joined in \([0-9.]*\) s.*/\1/p' "$log" | head -1)" \
        "$(elapsed "$t0" "$t1")" "$js" "$jsim" \
        "$(awk -v d=$((s1 - s0)) -v hz="$HZ" -v w="$wall" 'BEGIN{printf "%.1f", 100 * d / hz / w}')" \
        "$(awk -v d=$((a1 - a0)) -v hz="$HZ" -v w="$wall" 'BEGIN{printf "%.1f", 100 * d / hz / w}')" \
        "$(awk '/VmRSS/ {printf "%.0f", $2 / 1024}' /proc/$SRV/status)"
    kill -TERM $SIM; wait $SIM 2>/dev/null || true; SIM=
    stop
}

echo "machine: $(nproc) CPUs, $(uname -sr), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| $N agents over | all joined (simulator) | all online (polled) | service CPU to join | simulator CPU to join | service CPU (steady) | simulator CPU (steady) | service RSS |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
agents "tls://" "tls://localhost:$PORT"
agents "tcp:// loopback (baseline)" "tcp://127.0.0.1:$PLAIN"
agents "unix:// (baseline)" "unix://$T/roster.sock"
echo
start rpc
echo "| resource.status, one warm connection | n | p50 ms | p99 ms | mean ms | note |"
echo "| --- | --- | --- | --- | --- | --- |"
"$SB" warm --uri "tls://localhost:$PORT" --ca "$T/ca/ca.pem" --token-file "$T/token" --n "$NRPC" --label "tls:// ($N nodes)"
"$SB" warm --uri "tcp://127.0.0.1:$PLAIN" --token-file "$T/token" --n "$NRPC" --label "tcp:// loopback (baseline)"
"$SB" warm --uri "unix://$T/roster.sock" --n "$NRPC" --label "unix:// (baseline)"
echo
echo "\`roster resource status\` as a whole process ($N nodes; hyperfine, $RUNS runs):"
echo
hyperfine -N -w 3 -r "$RUNS" --style none --export-markdown "$T/hf.md" \
    -n "tls:// (client certificate, user role)" \
    "$R resource --uri tls://localhost:$PORT --ca $T/ca/ca.pem --cert $T/ca/ops.pem --key $T/ca/ops.key status" \
    -n "unix:// (baseline)" \
    "$R resource --uri unix://$T/roster.sock status" >/dev/null
cat "$T/hf.md"
stop
