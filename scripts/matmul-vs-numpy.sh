#!/usr/bin/env bash
# CPU matmul GFLOP/s of parbench against NumPy/OpenBLAS with the same thread count, side by
# side and interleaved (rounds alternate), so drift hits both alike. Not part of CI.
#
#   scripts/matmul-vs-numpy.sh [size] [rounds]      (defaults: 2000, 3)
#
# Installs numpy and threadpoolctl into target/numpy-venv on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-2000}
rounds=${2:-3}
venv=target/numpy-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet numpy threadpoolctl
fi
cargo build --release --quiet
bin=target/release/parbench

# NumPy at its best: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE may be set on this machine for older
# OpenBLAS builds (see the env notes) and slow a current one, so they are unset for NumPy alone.
numpy() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" "$@"; }

numpy_gflops() { # threads -> median GFLOP/s of 7 products
  numpy - "$size" "$1" <<'PY'
import sys, time, statistics
import numpy as np
from threadpoolctl import threadpool_limits
n, t = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
a = rng.random((n, n), dtype=np.float32); b = rng.random((n, n), dtype=np.float32)
with threadpool_limits(limits=t, user_api="blas"):
    a @ b
    rates = []
    for _ in range(7):
        t0 = time.perf_counter(); a @ b; rates.append(2 * n**3 / (time.perf_counter() - t0) / 1e9)
print(f"{statistics.median(rates):.1f}")
PY
}

parbench_gflops() { # threads -> GFLOP/s from the median of `parbench matmul`
  "$bin" matmul --size "$size" --ops 1 --threads "$1" --warmup 1 --min-samples 7 --max-samples 7 --json --quiet |
    "$venv/bin/python" -c 'import json,sys; d=json.load(sys.stdin); print("%.1f" % d["runs"][0]["derived"]["gflops"])'
}

# Which BLAS and kernel NumPy runs, as threadpoolctl reports it.
numpy - <<'PY'
import numpy as np
from threadpoolctl import threadpool_info
for lib in threadpool_info():
    if lib.get("user_api") == "blas":
        print(f"# numpy {np.__version__}: {lib.get('internal_api')} {lib.get('version')}, "
              f"kernel {lib.get('architecture')}, {lib.get('num_threads')} threads")
PY
printf '%-8s %-6s %12s %12s %8s\n' round threads parbench numpy ratio
rows=()
for r in $(seq 1 "$rounds"); do
  for t in 1 2; do
    p=$(parbench_gflops "$t"); n=$(numpy_gflops "$t")
    rows+=("$t $p $n")
    printf '%-8s %-6s %12s %12s %8s\n' "$r" "$t" "$p" "$n" "$("$venv/bin/python" -c "print(f'{$p/$n:.2f}')")"
  done
done
# One figure per thread count: the median of each side's rounds, and their ratio. A single
# round's ratio moves with whatever else the host ran during it; the medians of interleaved
# rounds share the drift.
printf '%s\n' "${rows[@]}" | "$venv/bin/python" -c '
import sys, statistics
by = {}
for line in sys.stdin:
    t, p, n = line.split()
    by.setdefault(t, ([], []))
    by[t][0].append(float(p)); by[t][1].append(float(n))
for t, (p, n) in sorted(by.items()):
    mp, mn = statistics.median(p), statistics.median(n)
    print(f"median   {t:<6} {mp:12.1f} {mn:12.1f} {mp / mn:8.2f}")
'
