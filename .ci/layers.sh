#!/usr/bin/env bash
# Layering check (ARCHITECTURE.md "Invariants"): the sans-IO service core
# and the format/protocol crates below it never do file, socket, process or
# environment IO, and never depend on an async runtime or on the shells.
#
# 1. `cargo tree` of each pure crate (normal dependencies only) must not
#    contain a forbidden crate.
# 2. The sources of every workspace crate in those closures must not name
#    the std IO modules (std::fs, std::net, std::env, std::process,
#    std::os::unix::net) or read the clock (SystemTime::now, Instant::now).
#    Test code (tests.rs, proptests.rs, files under tests/ or benches/,
#    and `#[cfg(test)]` modules) is exempt.
set -euo pipefail
cd "$(dirname "$0")/.."

pure=(roster-idset roster-hostlist roster-rset roster-eventlog roster-rpc roster-fluxmsg roster-core)
forbidden='^(tokio|mio|hyper|socket2|libc|nix|rustix|roster-store|roster-serve|roster-transport|roster-client|roster-agent|roster-config|roster-topo|roster-model) '
fail=0
declare -A seen=()
for p in "${pure[@]}"; do
    tree=$(cargo tree -q --locked -p "$p" -e normal --prefix none --no-dedupe | sort -u)
    bad=$(grep -E "$forbidden" <<<"$tree" || true)
    if [[ -n $bad ]]; then
        echo "layers: $p depends on IO/shell crates:" >&2
        sed 's/^/    /' <<<"$bad" >&2
        fail=1
    fi
    while read -r name _ path; do
        [[ $path == "(/"* ]] || continue
        dir=${path#(}; dir=${dir%)}
        seen[$name]=$dir
    done < <(grep -E '^roster-' <<<"$tree")
done

pattern='std::(fs|net|env|process)\b|std::os::unix::net|SystemTime::now|Instant::now|std::io::stdin|File::(open|create)'
for name in "${!seen[@]}"; do
    dir=${seen[$name]}
    # Production sources only: skip test files and everything after a
    # `#[cfg(test)]` line (test modules sit at the end of a file).
    while IFS= read -r f; do
        case $f in */tests.rs|*/proptests.rs|*/tests/*|*/benches/*) continue ;; esac
        hits=$(awk '/^#\[cfg\(test\)\]/{exit} {print FILENAME":"FNR": "$0}' "$f" | grep -E "$pattern" | grep -vE '^\S+: *//' || true)
        if [[ -n $hits ]]; then
            echo "layers: $name must not do IO or read the clock:" >&2
            sed 's/^/    /' <<<"$hits" >&2
            fail=1
        fi
    done < <(find "$dir/src" -name '*.rs')
done
if ((fail)); then
    echo "layers: FAILED (see ARCHITECTURE.md, Invariants)" >&2
    exit 1
fi
echo "layers: ok (${#seen[@]} pure crates checked: ${!seen[*]})"
