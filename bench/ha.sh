#!/usr/bin/env bash
# High availability on etcd (release build), all on loopback:
#   a 3-member etcd cluster, 2 `roster serve` (backend = "etcd") on Unix
#   sockets, an R of NODES nodes (default 16384) of which AGENTS have a
#   simulated agent (`roster agent --simulate`, default 1024)
#   given both servers, and a client draining one new rank every ~0.1 s
#   through both servers (ROSTER_URI list).
# 1. TRIALS (default 20) times: SIGKILL of the leader; time until the next
#    drain is accepted (by the standby that takes over); the killed server
#    is restarted as a standby.  At the end every acknowledged drain must
#    be drained on the last leader and in the etcd log, and no `offline`
#    event may have been posted by a new leader.
# 2. SIGKILL of an etcd follower, then of etcd's raft leader: the longest
#    gap between accepted drains, and whether roster's leader stepped down.
# 3. Durable drains/s through etcd and through the local state directory
#    (same machine, same run): `svcbench drains`, 1 and 64 clients.
# Needs Debian's etcd-server and etcd-client (etcdctl), python3.
# Usage: bench/ha.sh [TRIALS] [AGENTS]   (TRIALS=0: only parts 2 and 3)
set -euo pipefail
cd "$(dirname "$0")/.."
TRIALS=${1:-20}
AGENTS=${2:-1024}
NODES=${NODES:-16384} # R's size: ranks past the agents are drained too
command -v etcd >/dev/null || { echo "bench/ha.sh: needs etcd (apt-get install etcd-server)" >&2; exit 1; }
command -v etcdctl >/dev/null || { echo "bench/ha.sh: needs etcdctl (apt-get install etcd-client)" >&2; exit 1; }
# the etcd backend is a build feature (needs protoc)
cargo build --release --locked -q -p roster -p roster-svcbench --features roster/etcd
R=$PWD/target/release/roster
SB=$PWD/target/release/svcbench
T=$(mktemp -d /tmp/roster-ha-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$T"
}
trap cleanup EXIT
exec 3>&2 2>/dev/null # no "Killed" job notices; errors go to fd 3
say() { echo "$@" >&3; }
now() { date +%s.%N; }

# --- etcd ------------------------------------------------------------------
read -r -a P < <(python3 -c 'import socket
s=[socket.socket() for _ in range(6)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
CL="m0=http://127.0.0.1:${P[3]},m1=http://127.0.0.1:${P[4]},m2=http://127.0.0.1:${P[5]}"
EP=()
start_member() { # I [new|existing]
    local i=$1
    etcd --name "m$i" --data-dir "$T/m$i.data" \
        --listen-client-urls "http://127.0.0.1:${P[$i]}" --advertise-client-urls "http://127.0.0.1:${P[$i]}" \
        --listen-peer-urls "http://127.0.0.1:${P[$((i + 3))]}" --initial-advertise-peer-urls "http://127.0.0.1:${P[$((i + 3))]}" \
        --initial-cluster "$CL" --initial-cluster-state "${2:-new}" --initial-cluster-token roster-bench \
        >"$T/m$i.log" 2>&1 &
    MEMBER[$i]=$!
    PIDS+=($!)
}
declare -a MEMBER
for i in 0 1 2; do
    start_member "$i"
    EP+=("http://127.0.0.1:${P[$i]}")
done
ENDPOINTS=$(IFS=,; echo "${EP[*]}")
export ETCDCTL_API=3
until etcdctl --endpoints="$ENDPOINTS" endpoint health >/dev/null 2>&1; do sleep 0.2; done
raft_leader() { # index of etcd's raft leader
    etcdctl --endpoints="$ENDPOINTS" endpoint status -w json 2>/dev/null | python3 -c '
import json,sys
st=json.load(sys.stdin)
for e in st:
    if e["Status"]["header"]["member_id"]==e["Status"]["leader"]:
        print(int(e["Endpoint"].rsplit(":",1)[1])); break'
}
member_of_port() { for i in 0 1 2; do [ "${P[$i]}" = "$1" ] && echo "$i"; done; return 0; }

# --- roster ------------------------------------------------------------------
LAST=$((NODES - 1))
ALAST=$((AGENTS - 1))
QUOTED=$(printf '"%s",' "${EP[@]}")
config() { # PREFIX
    cat <<CFG
[resource]
noverify = true
[[resource.config]]
hosts = "sim[0-$LAST]"
cores = "0-3"
[serve]
backend = "etcd"
etcd-endpoints = [${QUOTED%,}]
etcd-prefix = "$1"
CFG
}
config /bench >"$T/ha.toml"
declare -A SRV
start_server() { # NAME
    "$R" serve --config "$T/ha.toml" --listen "unix://$T/$1.sock" >>"$T/$1.log" 2>&1 &
    SRV[$1]=$!
    PIDS+=($!)
    until [ -S "$T/$1.sock" ] && "$R" resource --uri "unix://$T/$1.sock" status >/dev/null 2>&1; do sleep 0.05; done
}
leader_name() {
    etcdctl --endpoints="$ENDPOINTS" get /bench/leader --print-value-only 2>/dev/null |
        python3 -c 'import json,sys
t=sys.stdin.read().strip()
print(json.loads(t)["uri"].rsplit("/",1)[1].split(".")[0] if t else "")'
}
start_server a
until [ "$(leader_name)" = a ]; do sleep 0.05; done
start_server b
export ROSTER_URI="unix://$T/a.sock,unix://$T/b.sock"
undrain_all() { # [URI]
    local d; d=$("$R" resource ${1:+--uri "$1"} status -s drained -no '{ranks}' 2>/dev/null | tr -d '\n')
    if [ -n "$d" ]; then "$R" resource ${1:+--uri "$1"} undrain "$d" >/dev/null 2>&1 || true; fi
}
online() { "$R" resource status -s online -no '{nnodes}' 2>/dev/null | tr -d ' \n'; }
"$R" agent --simulate "sim[0-$ALAST]" --cores 0-3 --heartbeat 2 >"$T/agents.log" 2>&1 &
PIDS+=($!)
t=$(now)
until [ "$(online)" = "$AGENTS" ]; do sleep 0.1; done
say "# $AGENTS agents online in $(echo "$t $(now)" | awk '{printf "%.2f", $2-$1}') s"

# The drainer: one new rank at a time, each through both servers.
cat >"$T/drainer.sh" <<'SH'
#!/usr/bin/env bash
R=$1; OUT=$2; LAST=$3; k=0
while [ "$k" -le "$LAST" ] && [ ! -e "$OUT.stop" ]; do
    t0=$(date +%s.%N)
    if err=$("$R" resource drain "$k" "ha bench" 2>&1 >/dev/null); then
        echo "$k ok $t0 $(date +%s.%N)" >>"$OUT"; k=$((k + 1))
    elif [[ $err == *"already drained"* ]]; then
        # recorded by a leader that died before its reply: not acknowledged
        echo "$k recorded $t0 $(date +%s.%N)" >>"$OUT"; k=$((k + 1))
    else
        echo "$k fail $t0 $(date +%s.%N)" >>"$OUT"
    fi
    sleep 0.1
done
SH
: >"$T/drains.log"
bash "$T/drainer.sh" "$R" "$T/drains.log" "$LAST" &
DRAINER=$!
PIDS+=($!)
sleep 1

# --- 1. leader SIGKILL trials --------------------------------------------
: >"$T/failover.txt"
OFFLINE=0
for trial in $(seq 1 "$TRIALS"); do
    L=$(leader_name)
    case $L in a) S=b ;; *) S=a ;; esac
    # Agents back on the leader before the next kill.
    deadline=$(( $(date +%s) + 20 ))
    until [ "$(online)" = "$AGENTS" ] || [ "$(date +%s)" -ge "$deadline" ]; do sleep 0.1; done
    # Any offline event posted by this leader since it took over?
    n=$("$R" resource --uri "unix://$T/$L.sock" eventlog 2>/dev/null | grep -c ' offline ' || true)
    OFFLINE=$((OFFLINE + n))
    t0=$(now)
    kill -9 "${SRV[$L]}"
    # First drain accepted that was sent after the kill.
    while :; do
        line=$(awk -v t="$t0" '$2 == "ok" && $3 > t {print $4; exit}' "$T/drains.log")
        [ -n "$line" ] && break
        sleep 0.02
    done
    echo "$t0 $line" | awk '{printf "%.3f\n", $2-$1}' >>"$T/failover.txt"
    say "trial $trial: $L killed, $S leads; first drain accepted after $(tail -1 "$T/failover.txt") s"
    [ "$(leader_name)" = "$S" ] || say "  (leader is now '$(leader_name)', expected $S)"
    start_server "$L"
done
touch "$T/drains.log.stop"
wait "$DRAINER" 2>/dev/null || true
if [ "$TRIALS" -gt 0 ]; then
python3 - "$T/failover.txt" >&3 <<'PY'
import statistics,sys
v=sorted(float(x) for x in open(sys.argv[1]))
q=lambda p: v[min(len(v)-1,int(p*len(v)))]
print(f"# failover: {len(v)} trials, time to first accepted drain after SIGKILL: p50 {statistics.median(v):.2f} s, p90 {q(0.9):.2f} s, max {v[-1]:.2f} s, min {v[0]:.2f} s")
PY
ACKED=$(awk '$2 == "ok" {print $1}' "$T/drains.log" | sort -n | tr '\n' ',' | sed 's/,$//')
NACK=$(awk '$2 == "ok"' "$T/drains.log" | wc -l)
DRAINED=$("$R" resource status -s drained -no '{ranks}' 2>/dev/null | tr -d '\n')
MISSING=$("$R" idset diff "$ACKED" "$DRAINED" 2>/dev/null || echo "?")
etcdctl --endpoints="$ENDPOINTS" get /bench/log/ --prefix --print-value-only 2>/dev/null |
    grep '"name":"drain"' | python3 -c 'import json,sys
print(",".join(json.loads(l)["context"]["idset"] for l in sys.stdin if l.strip()))' >"$T/logged.txt"
MISSING_LOG=$("$R" idset diff "$ACKED" "$(cat "$T/logged.txt")" 2>/dev/null || echo "?")
say "# $NACK acknowledged drains; missing on the last leader: '${MISSING}'; missing in the etcd log: '${MISSING_LOG}'; offline events posted by new leaders: $OFFLINE"

fi

# --- 2. etcd member kills ------------------------------------------------------
gap_during() { # LABEL CMD...: longest gap between accepted drains for 6 s around CMD
    local label=$1; shift
    : >"$T/gap.log"; rm -f "$T/gap.log.stop"
    undrain_all
    bash "$T/drainer.sh" "$R" "$T/gap.log" "$LAST" &
    local d=$!
    sleep 2
    local lead_before; lead_before=$(leader_name)
    local t0; t0=$(now)
    "$@"
    sleep 4
    touch "$T/gap.log.stop"; wait "$d" 2>/dev/null || true
    local g; g=$(awk -v t="$t0" '$2=="ok" {if (p && $4 > t - 1) {d=$4-p; if (d>m) m=d} p=$4} END {printf "%.2f", m}' "$T/gap.log")
    local fails; fails=$(awk '$2=="fail"' "$T/gap.log" | wc -l)
    say "# $label: longest gap between accepted drains $g s (drains refused: $fails); roster leader before/after: $lead_before/$(leader_name)"
}
L=$(raft_leader); LI=$(member_of_port "$L")
F=$(( (LI + 1) % 3 ))
gap_during "SIGKILL of etcd follower m$F" kill -9 "${MEMBER[$F]}"
start_member "$F" existing
until etcdctl --endpoints="$ENDPOINTS" endpoint health >/dev/null 2>&1; do sleep 0.2; done
L=$(raft_leader); LI=$(member_of_port "$L")
gap_during "SIGKILL of etcd raft leader m$LI" kill -9 "${MEMBER[$LI]}"
start_member "$LI" existing
until etcdctl --endpoints="$ENDPOINTS" endpoint health >/dev/null 2>&1; do sleep 0.2; done

# --- 3. durable drains/s: etcd vs local disk ----------------------------------
kill -9 "${SRV[a]}" "${SRV[b]}" 2>/dev/null || true
python3 -c "print(','.join(str(i) for i in range(2048)))" >"$T/ranks.txt"
config /rate >"$T/rate.toml"
"$R" serve --config "$T/rate.toml" --listen "unix://$T/rate.sock" >"$T/rate.log" 2>&1 &
PIDS+=($!); RATE=$!
until "$R" resource --uri "unix://$T/rate.sock" status >/dev/null 2>&1; do sleep 0.05; done
mkdir -p "$T/local"
sed '/^\[serve\]/,$d' "$T/ha.toml" >"$T/local.toml"
"$R" serve --config "$T/local.toml" --statedir "$T/local" --listen "unix://$T/local.sock" >"$T/local.log" 2>&1 &
PIDS+=($!); LOCAL=$!
until "$R" resource --uri "unix://$T/local.sock" status >/dev/null 2>&1; do sleep 0.05; done
for c in 1 64; do
    for b in etcd local; do
        case $b in etcd) U=unix://$T/rate.sock ;; *) U=unix://$T/local.sock ;; esac
        undrain_all "$U"
        "$SB" drains --uri "$U" --ranks "$T/ranks.txt" --clients "$c" --label "$b: 2,048 drains, $c client(s)" >&3
    done
done
kill "$RATE" "$LOCAL" 2>/dev/null || true
say "# machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); etcd $(etcd --version | head -1 | awk '{print $3}')"
