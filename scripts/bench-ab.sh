#!/usr/bin/env bash
# Two or more builds of the engine bench, run in turn: how src/engine/README.md compares a
# change to the engine on one bench (`tensor-loop/plain`, say), since the host's periods move
# every figure by up to 2x within minutes and a single build carries about +-10% from code
# placement alone. Each round runs every binary once (criterion, 0.3 s warm-up, 1.5 s of
# samples) and prints its estimate; compare the builds round by round, never across rounds.
#
#   scripts/bench-ab.sh ROUNDS FILTER BENCH_BINARY...
#
# A bench binary is what `cargo bench --bench engine --no-run` prints as its executable; copy
# it aside before building the other side. Exit 2 on bad arguments.
set -euo pipefail
if [ $# -lt 3 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/bench-ab.sh ROUNDS FILTER BENCH_BINARY... (ROUNDS a positive integer)" >&2
  exit 2
fi
rounds=$1 filter=$2
shift 2
for b in "$@"; do
  if ! [ -x "$b" ]; then echo "bench-ab.sh: $b is not an executable" >&2; exit 2; fi
done
printf '%-6s %-40s %s\n' round binary estimate
for r in $(seq 1 "$rounds"); do
  for b in "$@"; do
    # Criterion's `time: [low estimate high]` (after the bench's name when it is short): the
    # middle one.
    est=$("$b" --bench "$filter" --exact --warm-up-time 0.3 --measurement-time 1.5 \
      --discard-baseline --noplot 2>/dev/null |
      awk -F'[][]' '/time:/ { split($2, v, " "); print v[3], v[4]; exit }')
    printf '%-6s %-40s %s\n' "$r" "$b" "${est:-no estimate (does the filter name one bench?)}"
  done
done
