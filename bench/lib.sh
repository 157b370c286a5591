# Shell helpers shared by the bench scripts (sourced; they use $R, the
# roster binary, $URI, the service, and $WORK, a scratch directory, at
# call time).
now() { date +%s.%N; }
elapsed() { echo "$1 $2" | awk '{printf "%.3f", $2 - $1}'; }
q() { "$R" resource --uri "$URI" status -s "$1" -no '{ranks}' 2>/dev/null | tr -d '\n'; }
wait_for() { # STATE WANT TIMEOUT -> prints the time it was first seen
    local deadline
    deadline=$(echo "$(now) $3" | awk '{printf "%.6f", $1 + $2}')
    while :; do
        if [ "$(q "$1")" = "$2" ]; then now; return 0; fi
        if awk -v a="$(now)" -v b="$deadline" 'BEGIN{exit !(a > b)}'; then
            echo "timeout waiting for $1 = $2 (now: $(q "$1"))" >&3; return 1
        fi
        sleep 0.05
    done
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }

# Start `roster serve` on unix://$WORK/NAME/roster.sock with CONFIG (and
# a copy of EVENTLOG as its eventlog, if given); waits until it answers
# `resource.status`.  Sets PID and URI, and adds PID to PIDS.
start_daemon() { # NAME CONFIG [EVENTLOG]
  local dir=$WORK/$1
  mkdir -p "$dir/state"
  [ -n "${3:-}" ] && cp "$3" "$dir/state/resource.eventlog"
  URI=unix://$dir/roster.sock
  "$R" serve --statedir "$dir/state" --listen "$URI" --config "$2" --monitor-force-up 2>"$dir/serve.log" &
  PID=$!
  PIDS+=("$PID")
  for _ in $(seq 1 1200); do
    "$R" resource --uri "$URI" status >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "bench: roster serve did not start:" >&2; cat "$dir/serve.log" >&2; exit 1
}
stop_daemon() { kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID=; }

# A configuration file naming R-FILE as the instance's R, without verification.
r_config() { # R-FILE OUT
  printf '[resource]\nnoverify = true\npath = "%s"\n' "$1" >"$2"
}

# A scratch directory $WORK and a list PIDS of processes started in it;
# on exit the processes are killed and the directory removed.
scratch() { # NAME
  WORK=$(mktemp -d "/tmp/roster-$1.XXXXXX")
  PIDS=()
  trap scratch_cleanup EXIT
}
scratch_cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
