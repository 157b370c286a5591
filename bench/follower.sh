#!/usr/bin/env bash
# The R16k follower figures of `roster graph --follow` (client::Follower):
# first graph from the acquire response, one update, match at 30 % drained,
# bytes per vertex (crates/model/benches/follower.rs; about 3 minutes).
# Usage: bench/follower.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-$(cd .. && pwd)/shared/bench}
[ -f "$SHARED/R16k.json" ] || { echo "bench: workloads not found in $SHARED" >&2; exit 1; }
export SHARED ROSTER_BENCH=1
echo "load: $(uptime)"
cargo bench --locked -p roster-model --bench follower 2>&1 |
    grep -E '^(follower|baseline)|time:'
