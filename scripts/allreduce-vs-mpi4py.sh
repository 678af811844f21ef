#!/usr/bin/env bash
# MPI_Allreduce timed by parbench (`allreduce --backend mpi`, variant mpi-allreduce) and by
# mpi4py on the same machine, sizes and ranks, in interleaved rounds (each round runs both, in
# turn), so drift hits both alike. Both call the same OpenMPI underneath: the ratio per size
# is parbench's harness (its non-blocking, polled MPI_Iallreduce with a deadline, and its
# batching), not the library. Not part of CI.
#
#   scripts/allreduce-vs-mpi4py.sh [ranks] [rounds] [sizes]
#       defaults: 2, 3, 4K,64K,1MiB,4MiB,16MiB,64MiB,256MiB
#
# Installs mpi4py and numpy into target/mpi4py-venv on first use; builds parbench with the mpi
# feature.
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-2}
rounds=${2:-3}
sizes=${3:-4K,64K,1MiB,4MiB,16MiB,64MiB,256MiB}
venv=target/mpi4py-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet mpi4py numpy
fi
cargo build --release --features mpi --quiet
bin=target/release/parbench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -n "$ranks")

# mpi4py's side, sampled as parbench samples: per size a checked first run sets the batch
# (all-reduces per sample, about 2 ms), then 10 samples, each after a barrier; the median of
# the per-all-reduce times on rank 0.
cat > "$work/peer.py" <<'PY'
import json, sys, time, statistics
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
sizes = [int(s) for s in sys.argv[1].split(",")]
out = {}
for nbytes in sizes:
    n = nbytes // 4
    send = np.full(n, comm.rank + 1, dtype=np.float32)
    recv = np.empty(n, dtype=np.float32)
    comm.Barrier()
    t0 = time.perf_counter(); comm.Allreduce(send, recv, op=MPI.SUM); once = time.perf_counter() - t0
    expect = comm.size * (comm.size + 1) / 2
    assert np.all(recv == expect), "wrong sum"
    once = comm.bcast(once, root=0)
    reps = max(1, min(10000, int(np.ceil(0.002 / once)))) if once > 0 else 1
    # Blocking MPI_Allreduce, and MPI_Iallreduce + Wait (what parbench calls, polled with
    # MPI_Test so that a wait has a deadline), interleaved.
    samples = {"blocking": [], "nonblocking": []}
    for _ in range(10):
        for kind in samples:
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(reps):
                if kind == "blocking":
                    comm.Allreduce(send, recv, op=MPI.SUM)
                else:
                    comm.Iallreduce(send, recv, op=MPI.SUM).Wait()
            samples[kind].append((time.perf_counter() - t0) / reps)
    out[nbytes] = {k: statistics.median(v) for k, v in samples.items()}
if comm.rank == 0:
    print(json.dumps(out))
PY

# Sizes in bytes for mpi4py, from parbench's own parsing (the report's parameters).
bytes=""
for r in $(seq 1 "$rounds"); do
  "${mpi[@]}" "$bin" allreduce --backend mpi --sizes "$sizes" --warmup 1 --min-samples 10 \
    --quiet --json > "$work/parbench-$r.json"
  if [ -z "$bytes" ]; then
    bytes=$(python3 -c 'import json,sys; print(",".join(str(s) for s in json.load(open(sys.argv[1]))["runs"][0]["parameters"]["sizes"]))' "$work/parbench-$r.json")
  fi
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${mpi[@]}" "$venv/bin/python" "$work/peer.py" "$bytes" \
    > "$work/mpi4py-$r.json"
done

python3 - "$work" "$rounds" "$ranks" <<'PY'
import json, statistics, sys
work, rounds, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def label(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift}{unit}"
    return f"{b}B"
def human(s):
    return f"{s*1e6:.1f} µs" if s < 1e-3 else f"{s*1e3:.3f} ms"
ours, blocking, nonblocking = {}, {}, {}
for r in range(1, rounds + 1):
    run = json.load(open(f"{work}/parbench-{r}.json"))["runs"][0]
    assert all(c["passed"] for c in run["checks"]), "a parbench check failed"
    for v in run["variants"]:
        name, size = v["name"].rsplit(" ", 1)
        if name == "mpi-allreduce":
            ours.setdefault(size, []).append(v["median_s"])
    for b, t in json.load(open(f"{work}/mpi4py-{r}.json")).items():
        blocking.setdefault(label(int(b)), []).append(t["blocking"])
        nonblocking.setdefault(label(int(b)), []).append(t["nonblocking"])
print(f"MPI all-reduce of float32 on {ranks} ranks, {rounds} interleaved rounds (median of per-round medians)")
print("parbench's mpi-allreduce calls MPI_Iallreduce and polls it with MPI_Test (a wait with a deadline);")
print("mpi4py times the same call with Wait, and the blocking MPI_Allreduce (another algorithm in OpenMPI)")
print()
print("| size | parbench | mpi4py Iallreduce | parbench / it (per round) | mpi4py Allreduce | parbench / it (per round) |")
print("|---|---|---|---|---|---|")
def ratio(a, b):
    per = ", ".join(f"{x/y:.2f}" for x, y in zip(a, b))
    return f"{statistics.median(a)/statistics.median(b):.2f} ({per})"
for size in ours:
    a = ours[size]
    print(f"| {size} | {human(statistics.median(a))} | {human(statistics.median(nonblocking[size]))} | "
          f"{ratio(a, nonblocking[size])} | {human(statistics.median(blocking[size]))} | {ratio(a, blocking[size])} |")
PY
