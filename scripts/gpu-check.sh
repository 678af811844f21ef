#!/usr/bin/env bash
# The one command that proves the GPU path.
#
#   scripts/gpu-check.sh --build     here, with cargo: puts a stripped release binary, the
#                                    prebuilt library tests and the scripts they need into
#                                    target/gpu-check/ (well under 64 MiB), nothing else
#   target/gpu-check/gpu-check.sh [--out DIR]
#                                    on the GPU machine, no cargo: runs the library tests
#                                    (the GPU ones included) and every scenario that can use
#                                    the GPU, PyTorch's figures beside them, and writes the
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
  cp scripts/gpu-check.sh scripts/gpu_vs_torch.py "$out/"
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
step matmul "$bin" matmul --device cuda --size 8192 --ops 10 -o "$dir/matmul.json"
# The CPU half is a 16-thread product on a shared host: its samples spread by ±20%, so the
# overlap efficiency (a ratio of medians) needs more rounds than the default to be firm.
step cpu-gpu "$bin" cpu-gpu --min-samples 15 -o "$dir/cpu-gpu.json" --trace "$dir/cpu-gpu-trace.json"
step run-copy "$bin" run-copy --size 8192 --ops 10 -o "$dir/run-copy.json" --trace "$dir/run-copy-trace.json"
step torch python3 "$here/gpu_vs_torch.py" measure "$dir/torch.json"
step summary python3 "$here/gpu_vs_torch.py" summary "$dir"
cat "$dir/summary.md"
exit $status
