#!/usr/bin/env bash
# The one command that proves the GPU path.
#
#   scripts/gpu-check.sh --build     here, with cargo: puts a stripped release binary, the
#                                    prebuilt library tests and the scripts they need into
#                                    target/gpu-check/ (well under 64 MiB), nothing else
#   target/gpu-check/gpu-check.sh [--out DIR]
#                                    on the GPU machine, no cargo: runs the library tests,
#                                    then the GPU ones (ignored by a plain `cargo test`,
#                                    run here with --ignored), and every scenario that can use
#                                    the GPU, PyTorch's figures beside them, regenerates the
#                                    kernels' PTX where nvcc is found, and writes the
#                                    reports and summary.md to DIR (default
#                                    results/gpu/<gpu-name>-<date>); exits non-zero if any
#                                    test or check fails
set -euo pipefail

if [ "${1:-}" = "--build" ]; then
  cd "$(dirname "$0")/.."
  out=target/gpu-check
  cargo build --release --quiet
  # The library's unit tests, built in release; cargo names the executable in its JSON.
  tests=$(cargo test --release --lib --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "lib" in m["target"]["kind"]:
        print(m["executable"])')
  [ -n "$tests" ] || { echo "error: no library test executable was built" >&2; exit 1; }
  rm -rf "$out"
  mkdir -p "$out"
  cp target/release/parbench "$out/parbench"
  cp "$tests" "$out/parbench-lib-tests"
  strip "$out/parbench" "$out/parbench-lib-tests"
  cp scripts/gpu-check.sh scripts/gpu-vs-torch.py scripts/gpu-chapter-torch.py "$out/"
  cp src/device/cuda/kernels/elementwise.cu src/device/cuda/kernels/elementwise.ptx "$out/"
  bytes=$(du -cb "$out"/* | tail -n 1 | cut -f 1)
  limit=$((60 << 20))
  if [ "$bytes" -gt "$limit" ]; then
    echo "error: $out holds $bytes bytes, over the $limit-byte budget" >&2
    exit 1
  fi
  echo "$out: $(ls "$out" | tr '\n' ' ')($((bytes >> 20)) MiB); run $out/gpu-check.sh on the GPU machine"
  exit 0
fi

here=$(cd "$(dirname "$0")" && pwd)
bin=$here/parbench
tests=$here/parbench-lib-tests
[ -x "$bin" ] && [ -x "$tests" ] || {
  echo "error: run scripts/gpu-check.sh --build first (no $bin or $tests)" >&2
  exit 2
}

gpu=$("$bin" devices --json | python3 -c 'import json, sys
g = json.load(sys.stdin)["gpu"]
print(g.get("name", "gpu") if g["available"] else "")')
if [ -z "$gpu" ]; then
  echo "error: no usable GPU: $("$bin" devices | grep '^gpu')" >&2
  exit 1
fi
slug=$(printf '%s' "$gpu" | tr -cs 'A-Za-z0-9' '-' | sed 's/^-//; s/-$//' | tr 'A-Z' 'a-z')
dir=results/gpu/$slug-$(date -u +%Y-%m-%d)
if [ "${1:-}" = "--out" ]; then
  dir=${2:?--out needs a directory}
fi
mkdir -p "$dir"
echo "GPU: $gpu; reports in $dir"

status=0
# A hung step must not eat the machine's time: each gets GPU_CHECK_STEP_TIMEOUT seconds.
limit_s=${GPU_CHECK_STEP_TIMEOUT:-300}
step() { # name, then the command; its output goes to DIR/name.txt
  local name=$1
  shift
  echo "== $name"
  if ! timeout --kill-after=10 "$limit_s" "$@" > "$dir/$name.txt" 2>&1; then
    echo "   FAILED (see $dir/$name.txt)"
    status=1
  fi
  tail -n 3 "$dir/$name.txt" | sed 's/^/   /'
}

"$bin" devices > "$dir/devices.txt"
"$bin" devices --json > "$dir/devices.json"
step tests "$tests" --test-threads 4
# The GPU tests are `#[ignore = "needs a GPU"]`, so a plain `cargo test` on a machine without
# one leaves them out; here they run, and fail if they find no GPU. Their names start with
# `gpu_`, which keeps other ignored tests (slow calibrations) out.
step gpu-tests "$tests" --ignored gpu_ --test-threads 4
if ! grep -q '^running [1-9]' "$dir/gpu-tests.txt"; then
  echo "   FAILED: no GPU test ran (see $dir/gpu-tests.txt)"
  status=1
fi
step matmul "$bin" matmul --device cuda --size 8192 --ops 10 -o "$dir/matmul.json"
# Balanced halves, as the book balances its two GPUs: on an H100 the default 6000² takes a
# third of the CPU half's time, and the CPU half (16 threads on a shared host) spreads its
# samples by ±20%, so max(a, b) would measure the CPU's noise rather than the overlap. At
# 9000² the GPU half takes about as long as the CPU half; 15 rounds firm up the medians.
step cpu-gpu "$bin" cpu-gpu --gpu-size 9000 --min-samples 15 -o "$dir/cpu-gpu.json" --trace "$dir/cpu-gpu-trace.json"
step run-copy "$bin" run-copy --size 8192 --ops 10 -o "$dir/run-copy.json" --trace "$dir/run-copy-trace.json"
step async "$bin" async --device cuda -o "$dir/async.json"
step async-host-order "$bin" async --device cuda --gpu-order host -o "$dir/async-host-order.json"
step hybridize "$bin" hybridize --device cuda -o "$dir/hybridize.json"
step memory "$bin" memory --device cuda -o "$dir/memory.json"
step torch python3 "$here/gpu-vs-torch.py" measure "$dir/torch.json"
step torch-chapter python3 "$here/gpu-chapter-torch.py" measure "$dir/torch-chapter.json"
# The committed PTX must be what nvcc makes of the committed source (where nvcc is found).
regenerate_ptx() {
  "$1" -ptx -arch=compute_75 -O3 "$here/elementwise.cu" -o "$dir/elementwise.regenerated.ptx" &&
    sed -i 's/^\.version 9\.0$/.version 7.5/' "$dir/elementwise.regenerated.ptx" &&
    diff -u "$here/elementwise.ptx" "$dir/elementwise.regenerated.ptx" &&
    echo "the committed PTX is what $1 makes of elementwise.cu"
}
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
if [ -n "$nvcc" ]; then
  echo "== ptx"
  if ! regenerate_ptx "$nvcc" > "$dir/ptx.txt" 2>&1; then
    echo "   FAILED (see $dir/ptx.txt)"
    status=1
  fi
  tail -n 3 "$dir/ptx.txt" | sed 's/^/   /'
else
  echo "== ptx: no nvcc on this machine, the committed PTX was not regenerated" | tee "$dir/ptx.txt"
fi
step summary python3 "$here/gpu-vs-torch.py" summary "$dir"
cat "$dir/summary.md"
exit $status
