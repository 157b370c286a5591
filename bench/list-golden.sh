#!/usr/bin/env bash
# Output identity check for `roster resource list` / `info`: runs many
# variants against one daemon and writes each output (stdout, stderr, exit
# code) to DIR, so two binaries can be compared with `diff -r`.
#
# Usage: bench/list-golden.sh ROSTER URI DIR
set -uo pipefail
R=$1; URI=$2; DIR=$3
mkdir -p "$DIR"
F='{state}_{queue}_{properties}_{propertiesx}_{nnodes}_{ncores}_{ngpus}_{ranks}_{nodelist}'
variants=(
  "list"
  "list -o long"
  "list -q batch"
  "list -o rlist"
  "list -o default"
  "list -n"
  "list --skip-empty"
  "list -s all"
  "list -s up"
  "list -s down"
  "list -s free"
  "list -s allocated"
  "list -s up,all"
  "list -s down,free -o rlist"
  "list -o {nnodes}"
  "list -o {ncores}"
  "list -o {properties}"
  "list -o {propertiesx}"
  "list -o {queue}"
  "list -o {ranks}"
  "list -o {nodelist}"
  "list -o {rlist}"
  "list -o {state}"
  "list -o {state}_{properties}"
  "list -o {nnodes}_{ncores}_{ngpus}"
  "list -o $F"
  "list -s all -o $F"
  "list -s up -o {properties:>5.5+}_{nodelist}"
  "list -o sort:-nnodes_{state}_{nnodes}_{properties}"
  "list -i 0-99 -o $F"
  "list -i 7,100-200,16000-16383"
  "list -i node[00001-00100]"
  "list -i node[00010,00005,16384] -o $F"
  "list -i nosuch"
  "list -i nosuch --no-skip-empty"
  "list -s bogus"
  "list -o nope"
  "info"
  "info -s all"
  "info -s up"
  "info -s down"
  "info -s free"
  "info -s allocated"
  "info -s up,all"
  "info -s free,down"
  "info -i 0-99"
  "info -i node[00001-00100]"
  "info -i nosuch"
)
i=0
for v in "${variants[@]}"; do
  # arguments are separated by spaces; '_' inside one stands for a space
  read -r -a args <<<"$v"
  args=("${args[@]//_/ }")
  "$R" resource --uri "$URI" "${args[@]}" >"$DIR/$i.out" 2>"$DIR/$i.err"
  echo "$? $v" >"$DIR/$i.rc"
  i=$((i + 1))
done
