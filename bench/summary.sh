#!/usr/bin/env bash
# `roster resource status` and `list` against the process floor (a bare
# `roster idset count 1`), issue 27: a release daemon on a temporary
# state directory per workload, 30 % of the ranks drained at random, then
# the floor and each command timed alternately (whole process, fork to
# exit), RUNS rounds.  Prints one line per row,
#   row<TAB>median_ms<TAB>floor_ms<TAB>ratio
# (the floor is the median of the floor runs of the same rounds), which
# bench/floor.sh reads.  Results: bench/RESULTS.md.
#
# Usage: bench/summary.sh [RUNS]        (default 15, at least 9)
#   ROSTER=path/to/roster   time that binary instead of building one
#   SKIP_131K=1             only the 16k rows
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-$(cd .. && pwd)/shared/bench}
[ -f "$SHARED/R16k.json" ] || { echo "bench: workloads not found in $SHARED" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench: needs python3 (drain set, timing)" >&2; exit 1; }
RUNS=${1:-15}
[ "$RUNS" -ge 9 ] || { echo "bench: at least 9 runs" >&2; exit 1; }

if [ -z "${ROSTER:-}" ]; then
  nice -n 5 cargo build --release --locked -q -p roster --bin roster
  T=${CARGO_TARGET_DIR:-target}
  case $T in /*) ;; *) T=$PWD/$T ;; esac
  ROSTER=$T/release/roster
fi
R=$ROSTER
WORK=$(mktemp -d /tmp/roster-summary.XXXXXX)
PID=
cleanup() {
  if [ -n "$PID" ]; then kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

drainset() { # N COUNT -> the README's drain set (random.Random(42).sample)
  python3 -c 'import random, sys; n, k = int(sys.argv[1]), int(sys.argv[2]); print(",".join(map(str, sorted(random.Random(42).sample(range(n), k)))))' "$1" "$2"
}

. bench/lib.sh # start_daemon, stop_daemon, r_config

drain() { # idset-file: one resource.drain RPC (the set is too long for argv)
  python3 - "${URI#unix://}" "$1" <<'PY'
import http.client, json, socket, sys
class Conn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(sys.argv[1])
ranks = open(sys.argv[2]).read().strip()
c = Conn("localhost")
c.request("POST", "/v1/resource.drain", json.dumps({"targets": ranks, "reason": "bench-30pct"}),
          {"Content-Type": "application/json"})
r = c.getresponse()
body = r.read()
if r.status != 200:
    sys.exit("bench: drain failed: %d %s" % (r.status, body[:200]))
PY
}

# Time the floor and each row alternately: ROW=COMMAND ... (one word
# list per row, split on spaces).
alternate() {
  python3 - "$RUNS" "$R" "$@" <<'PY'
import os, statistics, subprocess, sys, time
runs, roster = int(sys.argv[1]), sys.argv[2]
rows = [a.split("=", 1) for a in sys.argv[3:]]
floor = [roster, "idset", "count", "1"]
devnull = os.open(os.devnull, os.O_WRONLY)
def once(argv):
    t = time.perf_counter()
    p = subprocess.Popen(argv, stdout=devnull, stderr=devnull, close_fds=False)
    if p.wait() != 0:
        sys.exit("bench: failed: " + " ".join(argv))
    return (time.perf_counter() - t) * 1e3
cmds = [("floor", floor)] + [(name, [roster] + cmd.split()) for name, cmd in rows]
for _, c in cmds:  # warm up (page cache, daemon caches)
    once(c); once(c)
times = {name: [] for name, _ in cmds}
for _ in range(runs):
    for name, c in cmds:
        times[name].append(once(c))
f = statistics.median(times["floor"])
for name, _ in cmds[1:]:
    m = statistics.median(times[name])
    print(f"{name}\t{m:.2f}\t{f:.2f}\t{m / f:.2f}")
PY
}

# R16k (the shared workload), 30 % drained in one drain.
drainset 16384 4915 > "$WORK/drain16k.txt"
r_config "$SHARED/R16k.json" "$WORK/r16k.toml"
start_daemon r16k "$WORK/r16k.toml"
drain "$WORK/drain16k.txt"
alternate "status R16k 30% drained=resource --uri $URI status" \
  "list R16k 30% drained=resource --uri $URI list" \
  "drain listing R16k 30% drained=resource --uri $URI drain"
stop_daemon

[ -n "${SKIP_131K:-}" ] && exit 0

# R131k uniform: 131,072 nodes of 64 cores and 4 GPUs.
"$R" R encode --ranks 0-131071 --hosts 'node[0-131071]' --cores 0-63 --gpus 0-3 > "$WORK/R131k.json"
drainset 131072 39321 > "$WORK/drain131k.txt"
r_config "$WORK/R131k.json" "$WORK/r131k.toml"
start_daemon r131k "$WORK/r131k.toml"
drain "$WORK/drain131k.txt"
alternate "status R131k 30% drained=resource --uri $URI status" \
  "list R131k 30% drained=resource --uri $URI list"
stop_daemon
