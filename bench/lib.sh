# Shell helpers shared by bench/agents.sh and bench/relays.sh (sourced;
# they use $R, the roster binary, and $URI, the service, at call time).
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
