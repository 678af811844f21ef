#!/usr/bin/env bash
# Regression check for CI: run scenarios/ci.toml, compare with a committed baseline, and exit
# non-zero on a regression seen in two runs in a row (1) or on bad input (2).
# See results/README.md.
#
#   scripts/ci-regress.sh [baseline.json]        THRESHOLD=25% by default (see results/README.md)
#
# Also writes target/ci-regress/github-action-benchmark.json for the common CI charting action.
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=${1:-results/baselines/ci-2core-epyc.json}
threshold=${THRESHOLD:-25%}
out=target/ci-regress
mkdir -p "$out"
cargo build --release --quiet
bin=target/release/parbench
# This VM's speed drifts in bursts (see results/README.md): a regression must show in two
# runs in a row to fail, so a burst during one run is not reported as a slow-down.
for attempt in 1 2; do
  "$bin" run scenarios/ci.toml --quiet -o "$out/new.json" > "$out/table.txt"
  "$bin" export "$out/new.json" -o "$out/github-action-benchmark.json"
  status=0
  "$bin" compare "$baseline" "$out/new.json" --threshold "$threshold" > "$out/compare.txt" || status=$?
  cat "$out/compare.txt"
  if [ "$status" -ne 1 ]; then
    exit "$status"
  fi
  [ "$attempt" -eq 1 ] && echo "regression in run 1: confirming with a second run" >&2
done
exit 1
