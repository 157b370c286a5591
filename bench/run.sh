#!/usr/bin/env bash
# Whole-process timings of `roster` on the shared workloads (../shared/bench),
# plus same-run baselines, with hyperfine. Results go to bench/out/*.json and
# a summary table on stdout (paste it into bench/RESULTS.md with the date).
#
# Usage: bench/run.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-$(cd .. && pwd)/shared/bench}
[ -f "$SHARED/R16k.json" ] || { echo "bench: workloads not found in $SHARED" >&2; exit 1; }
command -v hyperfine >/dev/null || { echo "bench: needs hyperfine (apt-get install hyperfine)" >&2; exit 1; }
cargo build --release --locked -q
R=$PWD/target/release/roster
OUT=bench/out
mkdir -p "$OUT"
RUNS=20; WARM=3
[ "${1:-}" = "--quick" ] && { RUNS=5; WARM=1; }

# FRAG: every 3rd host of node[1-100000] as one comma list.
python3 -c 'print(",".join("node%d" % i for i in range(1, 100001, 3)))' > "$OUT/frag.txt"

# hyperfine >= 1.16 can feed stdin itself (--input) and run without a shell
# (-N); older ones (Debian 12 ships 1.15) get the redirection through a shell,
# whose spawn time hyperfine measures and subtracts. Every command, baselines
# included, goes through the same path so the ratios stay comparable.
if hyperfine --help | grep -q -- '--input'; then MODE=input; else MODE=shell; fi

run() { # name, command [, stdin file]
  local input=${3:-/dev/null}
  if [ "$MODE" = input ]; then
    hyperfine -N --style none --runs "$RUNS" --warmup "$WARM" --export-json "$OUT/$1.json" --input "$input" "$2" >/dev/null
  else
    hyperfine --style none --runs "$RUNS" --warmup "$WARM" --export-json "$OUT/$1.json" "$2 < $input" >/dev/null
  fi
  python3 - "$OUT/$1.json" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print("| %-28s | %8.2f ms | %8.2f ms | %8.2f ms | %8.2f ms |" % (
    sys.argv[2], r["median"] * 1e3, r["min"] * 1e3, r["stddev"] * 1e3,
    (r["user"] + r["system"]) * 1e3))
PY
}

cat "$SHARED/R16k.json" "$SHARED/R16k_b.json" > "$OUT/R16k_and_b.json"
cat "$SHARED/R16k_lo.json" "$SHARED/R16k_hi.json" > "$OUT/R16k_lo_hi.json"

echo "# $(date -u +%FT%TZ), hyperfine $(hyperfine --version | cut -d" " -f2) ($MODE mode), $RUNS runs"
echo "| command | median | min | stddev | user+sys (mean) |"
echo "|---|---|---|---|---|"
run baseline_process_start "$R --version"
run baseline_python_json "python3 -c 'import json,sys; json.dump(json.load(sys.stdin), sys.stdout)'" "$SHARED/R16k.json"
run R_decode "$R R decode" "$SHARED/R16k.json"
run R_decode_short "$R R decode --short" "$SHARED/R16k.json"
run R_diff "$R R diff" "$OUT/R16k_and_b.json"
run R_intersect "$R R intersect" "$OUT/R16k_and_b.json"
run R_append "$R R append" "$OUT/R16k_lo_hi.json"
run hostlist_count_frag "$R hostlist -c -" "$OUT/frag.txt"
