#!/usr/bin/env bash
# Regression check for CI: run scenarios/ci.toml, compare with a committed baseline, and exit
# non-zero on a regression (1) or on bad input (2). See results/README.md.
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
"$bin" run scenarios/ci.toml --quiet -o "$out/new.json" > "$out/table.txt"
"$bin" export "$out/new.json" -o "$out/github-action-benchmark.json"
"$bin" compare "$baseline" "$out/new.json" --threshold "$threshold" | tee "$out/compare.txt"
