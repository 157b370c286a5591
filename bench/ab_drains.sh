#!/usr/bin/env bash
# Separate durable drains of two builds side by side, alternated: each
# round runs the statedir's append+fdatasync floor (and, with B's
# svcbench if it has `fsync --room`, the floor of a line written into
# preallocated room), then A and B (in turn first), for 1 client and
# for group commit (16 and 64 clients); prints
# the medians and the ratios.  A fresh pair of daemons per client count,
# every rank drained once.
#
# Usage: bench/ab_drains.sh DIR-A DIR-B    (each with roster and svcbench)
#        env: RUNS (9), DRAINS (1500 a run), CLIENTS ("1 16 64"),
#             ENV_A / ENV_B (extra environment for A's / B's daemon,
#             e.g. ENV_A=ROSTER_LOOP_ACCEPT=0)
set -euo pipefail
cd "$(dirname "$0")/.."
A=$1 B=$2
SHARED=${SHARED:-$(cd .. && pwd)/shared/bench}
RUNS=${RUNS:-9}
DRAINS=${DRAINS:-1500}
CLIENTS=${CLIENTS:-1 16 64}
R=$A/roster
. bench/lib.sh
scratch ab
r_config "$SHARED/R16k.json" "$WORK/r.toml"
python3 - "$WORK" "$RUNS" "$DRAINS" <<'PY'
import random, sys
work, runs, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ranks = random.Random(7).sample(range(16384), min(16384, runs * n))
for i in range(runs):
    open(f"{work}/set{i}.txt", "w").write(",".join(map(str, ranks[i * n:(i + 1) * n])))
PY
med() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
rate() { grep -o '[0-9]*/s overall' | cut -d/ -f1; }
echo "## bench/ab_drains.sh ($(date -u '+%F %H:%M') UTC, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "A = $A ${ENV_A:-}; B = $B ${ENV_B:-}; $RUNS rounds of $DRAINS drains"
echo
echo "| clients | A (median) | B (median) | B / A | floor (median) | A / floor | B / floor | room floor (median) | B / room floor |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for c in $CLIENTS; do
  R=$A/roster
  # shellcheck disable=SC2086
  ( export ${ENV_A:-_X=1}; start_daemon "a$c" "$WORK/r.toml"; echo "$PID $URI" >"$WORK/a$c.pid" ) 
  read -r pa ua <"$WORK/a$c.pid"; PIDS+=("$pa")
  R=$B/roster
  # shellcheck disable=SC2086
  ( export ${ENV_B:-_X=1}; start_daemon "b$c" "$WORK/r.toml"; echo "$PID $URI" >"$WORK/b$c.pid" )
  read -r pb ub <"$WORK/b$c.pid"; PIDS+=("$pb")
  ra=() rb=() fl=() rm_=()
  for i in $(seq 0 $((RUNS - 1))); do
    fl+=("$("$A/svcbench" fsync --dir "$WORK/a$c/state" --n "$DRAINS" | rate)")
    rm_+=("$("$B/svcbench" fsync --dir "$WORK/a$c/state" --n "$DRAINS" --room 1 2>/dev/null | rate || echo 0)")
    if [ $((i % 2)) = 0 ]; then
      ra+=("$("$A/svcbench" drains --uri "$ua" --ranks "$WORK/set$i.txt" --clients "$c" | rate)")
      rb+=("$("$B/svcbench" drains --uri "$ub" --ranks "$WORK/set$i.txt" --clients "$c" | rate)")
    else
      rb+=("$("$B/svcbench" drains --uri "$ub" --ranks "$WORK/set$i.txt" --clients "$c" | rate)")
      ra+=("$("$A/svcbench" drains --uri "$ua" --ranks "$WORK/set$i.txt" --clients "$c" | rate)")
    fi
  done
  echo "clients $c: A ${ra[*]} | B ${rb[*]} | floor ${fl[*]} | room floor ${rm_[*]}" >&2
  kill -TERM "$pa" "$pb" 2>/dev/null || true
  ma=$(printf '%s\n' "${ra[@]}" | med) mb=$(printf '%s\n' "${rb[@]}" | med) mf=$(printf '%s\n' "${fl[@]}" | med) mr=$(printf '%s\n' "${rm_[@]}" | med)
  awk -v c="$c" -v a="$ma" -v b="$mb" -v f="$mf" -v r="$mr" 'BEGIN{printf "| %s | %d/s | %d/s | %.2f | %d/s | %.0f %% | %.0f %% | %d/s | %s |\n", c, a, b, b / a, f, 100 * a / f, 100 * b / f, r, (r > 0 ? sprintf("%.0f %%", 100 * b / r) : "—")}'
done
