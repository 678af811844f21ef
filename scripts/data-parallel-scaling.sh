#!/usr/bin/env bash
# Data-parallel training at the defaults, in one process and as an MPI job on this machine, in
# one run: the scaling efficiencies, and the 2-rank MPI ring's throughput against the
# in-process 2-device ring's. Prints a Markdown table with the machine's FMA peak before and
# after (results/data-parallel-scaling.md is its output). Needs OpenMPI
# (apt-get install -y libopenmpi-dev openmpi-bin libclang-dev). About a minute here.
#
#   scripts/data-parallel-scaling.sh [RANKS]      (default 2; outputs under target/data-parallel/)
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-2}
out=target/data-parallel
mkdir -p "$out"
cargo build --release --quiet --features mpi
bin=target/release/parbench
probe() {
  local p=../shared/tools/machine-probe
  if [ -x "$p" ]; then "$p" | tr '\n' ' '; else echo "(no machine-probe at $p)"; fi
}
# As root in a container: allowed; shared-memory transport; more ranks than cores allowed.
mpi=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -n "$ranks")

before=$(probe)
"$bin" data-parallel --devices "$ranks" --quiet -o "$out/engine.json" > /dev/null
"${mpi[@]}" "$bin" data-parallel --backend mpi --quiet -o "$out/mpi.json" > /dev/null
after=$(probe)

python3 - "$out/engine.json" "$out/mpi.json" "$before" "$after" <<'EOF'
import json, sys
engine, mpi = (json.load(open(p))["runs"][0] for p in sys.argv[1:3])
def rate(run, v): return run["derived"][f"{v}_samples_per_second"]
def eff(run, v): return run["derived"].get(f"{v}_scaling_efficiency")
def med(run, v): return next(x["median_s"] for x in run["variants"] if x["name"] == v)
k = engine["parameters"]["devices"]
print(f"Machine FMA peak probe before: {sys.argv[3].strip()}; after: {sys.argv[4].strip()}.\n")
print("| run | variant | median per run | samples/s | scaling efficiency |")
print("|---|---|---:|---:|---:|")
for name, run, variants in [("engine", engine, ["one-device", "parameter-server", "ring", "async"]),
                            ("mpi", mpi, ["one-device", "allreduce", "ring", "async"])]:
    for v in variants:
        key = v.replace("-", "_")
        if f"{key}_samples_per_second" not in run["derived"]:
            continue
        e = eff(run, key)
        print(f"| {name} | {v} | {med(run, v) * 1e3:.1f} ms | {rate(run, key):,.0f} | "
              f"{'' if e is None else f'{e:.2f}'} |")
ratio = rate(mpi, "ring") / rate(engine, "ring")
print(f"\n{k} MPI ranks' ring / {k} in-process devices' ring, throughput: {ratio:.2f}")
checks = engine["checks"] + mpi["checks"]
print(f"checks: {sum(c['passed'] for c in checks)} of {len(checks)} passed")
EOF
