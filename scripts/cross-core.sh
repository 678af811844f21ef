#!/usr/bin/env bash
# Why `async` moves between runs on a VM: runs `parbench async` a number of times and prints,
# per round, the one-way latency of a cache line between two threads' cores that the run
# measured just before and just after its samples (`cross_core_line_before_s`, `_after_s`)
# beside its cost per op. Each engine op moves a few lines between the pushing core and the
# worker's, so its cost follows that latency, which a host changes when it moves the vCPUs
# (src/engine/README.md, "The machine's periods"). Not part of CI; needs two CPUs.
#
#   scripts/cross-core.sh [rounds]      (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-10}
if [ "$(nproc)" -lt 2 ]; then echo "cross-core.sh: needs two CPUs, this machine offers $(nproc)" >&2; exit 2; fi
cargo build --release --quiet
bin=target/release/parbench
printf '%-6s %18s %18s %18s %8s\n' round 'line before (ns)' 'line after (ns)' 'async per op (ns)' ratio
for r in $(seq 1 "$rounds"); do
  "$bin" async --min-samples 5 --max-samples 5 --min-time 0 --json --quiet |
    python3 -c '
import json, sys
d = json.load(sys.stdin)["runs"][0]["derived"]
ns = lambda k: d[k] * 1e9
# No ratio when the latency moved between before and after (the run says so in a note).
ratio = "%.1f" % d["async_over_line_ratio"] if "async_over_line_ratio" in d else "moved"
print("%-6s %18.1f %18.1f %18.1f %8s" % (sys.argv[1], ns("cross_core_line_before_s"),
      ns("cross_core_line_after_s"), ns("async_per_op_s"), ratio))' "$r"
done
