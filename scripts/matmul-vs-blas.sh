#!/usr/bin/env bash
# CPU matmul GFLOP/s of parbench against NumPy/OpenBLAS and Intel MKL with the same thread
# count, side by side and interleaved (each round runs all three), so drift hits them alike; and
# each one's fraction of the FMA peak that `parbench devices --probe` measures before and after.
# Not part of CI.
#
#   scripts/matmul-vs-blas.sh [size] [rounds]      (defaults: 2000, 3)
#
# Installs numpy, threadpoolctl and mkl into target/blas-venv on first use. MKL's `cblas_sgemm`
# is called through ctypes on the same row-major float32 arrays NumPy multiplies.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-2000}
rounds=${2:-3}
venv=target/blas-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet numpy threadpoolctl mkl
fi
mkl_lib=$(ls "$venv"/lib/libmkl_rt.so* | head -n 1)
cargo build --release --quiet
bin=target/release/parbench
py="$venv/bin/python"

# Each library at its best: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE may be set on this machine
# for older OpenBLAS builds (see the env notes) and slow a current one; MKL_ENABLE_INSTRUCTIONS
# and MKL_CBWR would hold MKL to an older instruction set or a reproducible (slower) path.
blas() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u MKL_ENABLE_INSTRUCTIONS -u MKL_CBWR "$py" "$@"; }

# threads -> median GFLOP/s of 7 products, after one untimed product. $1: numpy or mkl.
blas_gflops() {
  blas - "$1" "$size" "$2" "$mkl_lib" <<'PY'
import ctypes, statistics, sys, time
import numpy as np
from threadpoolctl import threadpool_limits
lib_name, n, t, mkl_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(0)
a = rng.random((n, n), dtype=np.float32); b = rng.random((n, n), dtype=np.float32)
if lib_name == "numpy":
    limits = threadpool_limits(limits=t, user_api="blas")
    product = lambda: a @ b
else:
    mkl = ctypes.CDLL(mkl_path)
    mkl.MKL_Set_Num_Threads(ctypes.c_int(t))
    c = np.empty((n, n), dtype=np.float32)
    f32p = ctypes.POINTER(ctypes.c_float)
    pa, pb, pc = (x.ctypes.data_as(f32p) for x in (a, b, c))
    one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
    # CblasRowMajor (101), CblasNoTrans (111) twice: C = A·B.
    product = lambda: mkl.cblas_sgemm(101, 111, 111, n, n, n, one, pa, n, pb, n, zero, pc, n)
product()
rates = []
for _ in range(7):
    t0 = time.perf_counter(); product(); rates.append(2 * n**3 / (time.perf_counter() - t0) / 1e9)
print(f"{statistics.median(rates):.1f}")
PY
}

parbench_gflops() { # threads -> GFLOP/s from the median of `parbench matmul`
  "$bin" matmul --size "$size" --ops 1 --threads "$1" --warmup 1 --min-samples 7 --max-samples 7 --json --quiet |
    "$py" -c 'import json,sys; d=json.load(sys.stdin); print("%.1f" % d["runs"][0]["derived"]["gflops"])'
}

peak() { # -> "PER_CORE ALL_CORES CORES UNIT" from parbench's own probe
  "$bin" devices --probe --json |
    "$py" -c 'import json,sys; f=json.load(sys.stdin)["limits"]["fma"]["measured"]; print("%.1f %.1f %d %s" % (f["per_core_gflops"], f["all_cores_gflops"], f["cores"], f["unit"]))'
}

# Which kernels the libraries run: threadpoolctl for OpenBLAS, MKL's verbose banner for MKL.
blas - <<'PY'
import numpy as np
from threadpoolctl import threadpool_info
for lib in threadpool_info():
    if lib.get("user_api") == "blas":
        print(f"# numpy {np.__version__}: {lib.get('internal_api')} {lib.get('version')}, "
              f"kernel {lib.get('architecture')}, {lib.get('num_threads')} threads")
PY
MKL_VERBOSE=1 blas -c "import ctypes; ctypes.CDLL('$mkl_lib').MKL_Set_Num_Threads(1); ctypes.CDLL('$mkl_lib').cblas_sgemm(101,111,111,1,1,1,ctypes.c_float(1),(ctypes.c_float*1)(),1,(ctypes.c_float*1)(),1,ctypes.c_float(0),(ctypes.c_float*1)(),1)" |
  sed -n '1s/^MKL_VERBOSE /# mkl: /p'
before=$(peak)
echo "# peak before: $before (GFLOP/s per core, on all cores, cores, unit; parbench devices --probe)"
printf '%-8s %-7s %9s %9s %9s %9s %9s\n' round threads parbench numpy mkl p/numpy p/mkl
rows=()
for r in $(seq 1 "$rounds"); do
  for t in 1 2; do
    p=$(parbench_gflops "$t"); n=$(blas_gflops numpy "$t"); m=$(blas_gflops mkl "$t")
    rows+=("$t $p $n $m")
    printf '%-8s %-7s %9s %9s %9s %9s %9s\n' "$r" "$t" "$p" "$n" "$m" \
      "$("$py" -c "print(f'{$p/$n:.2f}')")" "$("$py" -c "print(f'{$p/$m:.2f}')")"
  done
done
after=$(peak)
echo "# peak after: $after"
# One figure per thread count: the median of each side's rounds, and their ratios. A single
# round's ratio moves with whatever else the host ran during it; the medians of interleaved
# rounds share the drift. Each median over the lower of the two peaks for its threads (the
# higher fraction) and over the higher (the lower fraction).
printf '%s\n' "${rows[@]}" | "$py" -c '
import sys, statistics
before, after = sys.argv[1].split(), sys.argv[2].split()
def peak_for(p, t):
    per_core, all_cores, cores = float(p[0]), float(p[1]), int(p[2])
    return all_cores if t >= cores else per_core * t
by = {}
for line in sys.stdin:
    t, *rates = line.split()
    by.setdefault(t, [[], [], []])
    for side, rate in zip(by[t], rates):
        side.append(float(rate))
for t, sides in sorted(by.items()):
    p, n, m = (statistics.median(s) for s in sides)
    print("median   " + f"{t:<7} {p:9.1f} {n:9.1f} {m:9.1f} {p / n:9.2f} {p / m:9.2f}")
b, a = float(before[0]), float(after[0])
if max(a, b) > 1.1 * min(a, b):
    print(f"# warning: the one-thread peak moved from {b:.1f} to {a:.1f} GFLOP/s across the rounds: "
          "the machine ran at two speeds, and the fractions below span both")
for t, sides in sorted(by.items()):
    lo, hi = sorted(peak_for(x, int(t)) for x in (before, after))
    cells = [f"{statistics.median(s) / hi:.2f}-{statistics.median(s) / lo:.2f}" for s in sides]
    print("of-peak  " + f"{t:<7} {cells[0]:>9} {cells[1]:>9} {cells[2]:>9}")
' "$before" "$after"
