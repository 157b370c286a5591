#!/usr/bin/env bash
# RFC 28 acquire latency on R16k.json: first response, and how soon an
# update follows a durable drain (crates/svcbench/src/bin/acqbench.rs).
# Usage: bench/acquire.sh [N]   (N drains, default 500)
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-$(cd .. && pwd)/shared/bench}
[ -f "$SHARED/R16k.json" ] || { echo "bench: workloads not found in $SHARED" >&2; exit 1; }
export ROSTER_BENCH=1
cargo build --release --locked -q -p roster -p roster-svcbench
echo "load: $(uptime)"
target/release/acqbench "$PWD/target/release/roster" "$SHARED" "${1:-500}"
