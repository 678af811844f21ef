#!/usr/bin/env bash
# Why `async` moves between runs on a VM: runs `parbench async` a number of times and prints,
# per round, the one-way latency of a cache line between two threads' cores and the cost of a
# closure handed to another thread through a channel, as the run's process measured them among
# the machine's limits at its start (`environment.limits.line`, `.channel`), beside async's cost
# per op. Each engine op moves a few lines between the pushing core and the worker's, so its
# cost follows that latency, which a host changes when it moves the vCPUs
# (src/engine/README.md, "The machine's periods"). Not part of CI; needs two CPUs.
#
#   scripts/cross-core.sh [rounds]      (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-10}
if [ "$(nproc)" -lt 2 ]; then echo "cross-core.sh: needs two CPUs, this machine offers $(nproc)" >&2; exit 2; fi
cargo build --release --quiet
bin=target/release/parbench
printf '%-6s %12s %15s %18s %14s\n' round 'line (ns)' 'channel (ns)' 'async per op (ns)' 'per op / line'
for r in $(seq 1 "$rounds"); do
  "$bin" async --min-samples 5 --max-samples 5 --min-time 0 --json --quiet |
    python3 -c '
import json, sys
report = json.load(sys.stdin)
limits = report["environment"].get("limits") or {}
def limit(probe, key):
    return ((limits.get(probe) or {}).get("measured") or {}).get(key)
line, channel = limit("line", "one_way_s"), limit("channel", "per_op_s")
per_op = report["runs"][0]["derived"]["async_per_op_s"]
ns = lambda s: "%.1f" % (s * 1e9) if s else "-"
print("%-6s %12s %15s %18s %14s" % (sys.argv[1], ns(line), ns(channel), ns(per_op),
      "%.1f" % (per_op / line) if line else "-"))' "$r"
done
