#!/usr/bin/env bash
# A scripted sweep over matrix sizes, ending in a plot.
#
#   scripts/sweep-matmul.sh [sizes] [threads]     (defaults: 250:2000:250, 1)
#
# Writes target/sweep-matmul/{sweep.json,sweep.jsonl,sweep.svg}. Interrupted? Run the same
# command again: it resumes from the journal and does not repeat finished sizes.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${1:-250:2000:250}
threads=${2:-1}
out=target/sweep-matmul
mkdir -p "$out"
cargo build --release --quiet
bin=target/release/parbench
journal=(--journal "$out/sweep.jsonl")
[ -f "$out/sweep.jsonl" ] && journal=(--resume "$out/sweep.jsonl")
"$bin" sweep matmul --set "size=$sizes" --set "threads=$threads" --set ops=3 \
  --min-samples 3 --max-time 20 --quiet "${journal[@]}" -o "$out/sweep.json" > "$out/table.txt"
"$bin" plot "$out/sweep.json" -o "$out/sweep.svg"
python3 - "$out/sweep.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
print(f"{'size':>6} {'median':>10} {'GFLOP/s':>8}")
for r in doc["runs"]:
    print(f"{r['parameters']['size']:>6} {r['variants'][0]['median_s']*1e3:>8.2f}ms {r['derived']['gflops']:>8.1f}")
PY
