#!/usr/bin/env bash
# Crash test of roster serve: drains in a loop while the daemon is killed
# with SIGKILL at random moments; after each restart every acknowledged
# drain must be present.  Usage: bench/crash.sh [ROUNDS] (default 200).
set -euo pipefail
cd "$(dirname "$0")/.."
export ROSTER_CRASH_ROUNDS=${1:-200}
exec cargo test --release --locked -p roster --test serve crash_loses_no_acknowledged_drain -- --nocapture
