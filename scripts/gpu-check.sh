#!/usr/bin/env bash
# The one command that proves the GPU path.
#
#   scripts/gpu-check.sh --build     here, with cargo: puts a stripped release binary, the
#                                    prebuilt library tests, the scripts they need and COMMIT
#                                    (the short commit, "-dirty" if the tree had changes) into
#                                    target/gpu-check/ (under 60 MiB, checked), nothing else
#   target/gpu-check/gpu-check.sh [--out DIR] [--archive FILE] [--rounds R] [--sanitizers]
#                                    on the GPU machine, no cargo: records the GPU's state
#                                    (nvidia-smi -q before and after, other compute processes,
#                                    clocks/power/throttling sampled every 250 ms during the
#                                    timed steps), runs the library tests, then the GPU ones
#                                    (ignored by a plain `cargo test`, run here with
#                                    --ignored), with --sanitizers also under compute-sanitizer
#                                    (memcheck with leak check, initcheck: slow), the error
#                                    paths (hidden GPU, missing ordinal, memory cap, injected
#                                    fault), every scenario that can use the GPU, and R rounds
#                                    (default 5) of parbench's async, hybridize, run-copy and
#                                    data-parallel training (where built with --device)
#                                    alternating with PyTorch's figures and the same training
#                                    job in PyTorch (DIR/round-N/), then
#                                    regenerates the kernels' PTX where nvcc is found and
#                                    writes summary.md with each goal's per-round ratios to DIR
#                                    (default results/gpu/<gpu-name>-<date>-<commit>); with
#                                    --archive, DIR is also packed into FILE (.tgz) at the
#                                    end, whether the check passed or not; exits non-zero if
#                                    any test, check or error path fails
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
  cp scripts/gpu-check.sh scripts/gpu-vs-torch.py scripts/gpu-chapter-torch.py scripts/train-vs-torch.py "$out/"
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [ "$commit" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    commit=$commit-dirty
  fi
  echo "$commit" > "$out/COMMIT"
  cp src/device/cuda/kernels/elementwise.cu src/device/cuda/kernels/elementwise.ptx \
    src/device/cuda/kernels/mlp.cu src/device/cuda/kernels/mlp.ptx "$out/"
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

dir='' archive='' rounds=5 sanitizers=0
while [ $# -gt 0 ]; do
  case $1 in
    --out) dir=${2:?--out needs a directory}; shift 2 ;;
    --archive) archive=${2:?--archive needs a file}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    --sanitizers) sanitizers=1; shift ;;
    *) echo "error: unknown option '$1' (--out DIR, --archive FILE, --rounds R, --sanitizers)" >&2; exit 2 ;;
  esac
done
case $rounds in
  '' | *[!0-9]* | 0) echo "error: --rounds takes a whole number of at least 1, not '$rounds'" >&2; exit 2 ;;
esac

gpu=$("$bin" devices --json | python3 -c 'import json, sys
g = json.load(sys.stdin)["gpu"]
print(g.get("name", "gpu") if g["available"] else "")')
if [ -z "$gpu" ]; then
  echo "error: no usable GPU: $("$bin" devices | grep '^gpu')" >&2
  exit 1
fi
commit=$(cat "$here/COMMIT" 2>/dev/null || echo unknown)
slug=$(printf '%s' "$gpu" | tr -cs 'A-Za-z0-9' '-' | sed 's/^-//; s/-$//' | tr 'A-Z' 'a-z')
dir=${dir:-results/gpu/$slug-$(date -u +%Y-%m-%d)-$commit}
mkdir -p "$dir"
echo "GPU: $gpu; kit built at $commit; reports in $dir"
echo "$commit" > "$dir/COMMIT"

sampler=
# shellcheck disable=SC2317 # called by the EXIT trap
finish() { # stop the sampler, record the GPU after, pack DIR: on every way out
  local rc=$?
  if [ -n "$sampler" ]; then kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; fi
  nvidia-smi -q > "$dir/nvidia-smi-after.txt" 2>&1 || true
  if [ -n "$archive" ]; then
    if tar -czf "$archive" -C "$(dirname "$dir")" "$(basename "$dir")"; then
      echo "packed $dir into $archive ($(du -h "$archive" | cut -f 1))"
    else
      echo "error: could not pack $dir into $archive" >&2
    fi
  fi
  exit "$rc"
}
trap finish EXIT

status=0
# A hung step must not eat the machine's time: each gets GPU_CHECK_STEP_TIMEOUT seconds.
limit_s=${GPU_CHECK_STEP_TIMEOUT:-300}
step() { # name, then the command; its output goes to DIR/name.txt
  local name=$1
  shift
  echo "== $name"
  mkdir -p "$(dirname "$dir/$name.txt")"
  if ! timeout --kill-after=10 "$limit_s" "$@" > "$dir/$name.txt" 2>&1; then
    echo "   FAILED (see $dir/$name.txt)"
    status=1
  fi
  tail -n 3 "$dir/$name.txt" | sed 's/^/   /'
}

# Whether the binary has a feature another change adds: its name in `parbench --help`,
# `parbench help SCENARIO` or `devices --json`. One place to change how a guard asks.
advertises() { # word [scenario]
  local text # whole, before grep -q: with pipefail a writer cut off by grep would fail the pipe
  text=$({ "$bin" --help; "$bin" devices --json; [ -z "${2:-}" ] || "$bin" help "$2"; } 2>/dev/null || true)
  grep -qF -- "$1" <<< "$text"
}

# An error path: the command must exit with the code given, within 60 s, with one line on
# stderr that contains every needle. Each verdict is a line of DIR/error-paths.tsv.
printf 'path\tverdict\tdetail\n' > "$dir/error-paths.tsv"
error_path() { # name, exit code wanted, needles (|-separated), then the command
  local name=$1 want=$2 needles=$3 rc=0 verdict=ok detail
  shift 3
  echo "== error path: $name"
  timeout --kill-after=5 60 "$@" > "$dir/error-$name.out" 2> "$dir/error-$name.txt" || rc=$?
  local lines
  lines=$(grep -c '' "$dir/error-$name.txt" || true)
  detail="exit $rc, $lines line(s): $(head -n 1 "$dir/error-$name.txt")"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    verdict=FAILED detail="no answer within 60 s (hung)"
  elif [ "$rc" != "$want" ] || [ "$lines" != 1 ] || grep -q panicked "$dir/error-$name.txt"; then
    verdict=FAILED detail="wanted exit $want and one line; $detail"
  else
    local needle
    IFS='|' read -ra parts <<< "$needles"
    for needle in "${parts[@]}"; do
      grep -qF -- "$needle" "$dir/error-$name.txt" || { verdict=FAILED detail="no '$needle'; $detail"; }
    done
  fi
  [ "$verdict" = ok ] || status=1
  printf '%s\t%s\t%s\n' "$name" "$verdict" "$(printf '%s' "$detail" | tr '\t' ' ')" >> "$dir/error-paths.tsv"
  echo "   $verdict: $detail"
}
not_built() { # name, what is missing
  echo "== error path: $1: not built ($2)"
  printf '%s\tnot built\t%s\n' "$1" "$2" >> "$dir/error-paths.tsv"
}

nvidia-smi -q > "$dir/nvidia-smi-before.txt" 2>&1 || true
"$bin" devices > "$dir/devices.txt"
"$bin" devices --json > "$dir/devices.json"
# The machine's limits, the GPU's among them (launches, pinned copies, cuBLAS's rate).
"$bin" devices --probe > "$dir/devices-probe.txt" 2>&1 || status=1
"$bin" devices --probe --json > "$dir/devices-probe.json" 2>/dev/null || status=1
step tests "$tests" --test-threads 4
# The GPU tests are `#[ignore = "needs a GPU"]`, so a plain `cargo test` on a machine without
# one leaves them out; here they run, and fail if they find no GPU. Their names start with
# `gpu_`, which keeps other ignored tests (slow calibrations) out. The ones that need two GPUs
# (`#[ignore = "needs 2 GPUs"]`: gpu_nccl_allreduce_on_two_gpus_equals_host_sgd) run only where
# the driver lists two; NCCL's must find libnccl.so.2 (pip install nvidia-nccl-cu13 or -cu12).
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
multi=(--skip gpu_nccl_allreduce_on_two_gpus)
[ "${gpus:-0}" -ge 2 ] && multi=()
step gpu-tests "$tests" --ignored gpu_ ${multi[@]+"${multi[@]}"} --test-threads 4
if ! grep -q '^running [1-9]' "$dir/gpu-tests.txt"; then
  echo "   FAILED: no GPU test ran (see $dir/gpu-tests.txt)"
  status=1
fi
# Tests first run at this commit, by name, so a rename cannot drop them unseen: deps' k-stream
# tests (a consumer on stream 1 after its producer on stream 0, random DAGs against op by op,
# bit for bit) and data-parallel's GPU training (kernels against host references, products
# with transposes, eager and graphed training against host SGD, a planted error caught).
for t in gpu_streams_order_a_consumer_after_its_producer \
  gpu_deps_random_dags_match_op_by_op_bit_for_bit \
  gpu_mlp_kernels_equal_their_host_references \
  gpu_mlp_products_with_transposes_equal_the_hosts \
  gpu_training_equals_host_sgd_eager_and_graphed \
  gpu_training_with_a_planted_error_fails_the_check; do
  if ! grep -q "$t \.\.\. ok" "$dir/gpu-tests.txt"; then
    echo "   FAILED: $t did not pass (see $dir/gpu-tests.txt)"
    status=1
  fi
done
if [ "$sanitizers" = 1 ]; then
  # Serially: the sanitizer's reports of one test must not interleave with another's.
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  if [ -z "$sanitizer" ]; then
    echo "== sanitizers: FAILED, --sanitizers and no compute-sanitizer" | tee "$dir/sanitizer-memcheck.txt"
    status=1
  else
    limit_s=${GPU_CHECK_SANITIZER_TIMEOUT:-900}
    # The limits' plausibility test checks timings, which a sanitizer slows tenfold and more.
    # Stream-ordered race tracking: a use of memory after its cuMemFreeAsync, or before its
    # cuMemAllocAsync, in stream order.
    step sanitizer-memcheck "$sanitizer" --tool memcheck --leak-check full \
      --track-stream-ordered-races all --error-exitcode 99 \
      "$tests" --ignored gpu_ --skip gpu_limits_are_measured ${multi[@]+"${multi[@]}"} --test-threads 1
    step sanitizer-initcheck "$sanitizer" --tool initcheck --error-exitcode 99 \
      "$tests" --ignored gpu_ --skip gpu_limits_are_measured ${multi[@]+"${multi[@]}"} --test-threads 1
    # Shared-memory hazards of the kernels, on the test that runs the most of them.
    # --nocapture: a failure under the tool shows its message even if the process dies.
    step sanitizer-racecheck "$sanitizer" --tool racecheck --error-exitcode 99 \
      "$tests" --ignored gpu_dependent_chains --test-threads 1 --nocapture
    # The training kernels' one shared-memory reduction (record_loss).
    step sanitizer-racecheck-mlp "$sanitizer" --tool racecheck --error-exitcode 99 \
      "$tests" --ignored gpu_mlp_kernels_equal_their_host_references --test-threads 1 --nocapture
    limit_s=${GPU_CHECK_STEP_TIMEOUT:-300}
  fi
fi

# The error paths: each one line, the right exit code, no hang.
error_path hidden-gpu 2 "GPU|CUDA_VISIBLE_DEVICES is ''" \
  env CUDA_VISIBLE_DEVICES= "$bin" async --device cuda
count=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1])).get("gpus", [])))' "$dir/devices.json")
error_path missing-ordinal 2 "no GPU $count: this machine has $count" \
  "$bin" --gpu "$count" async --device cuda
if advertises --gpu-memory-fraction memory; then
  error_path memory-cap 1 "GPU memory cap" \
    "$bin" memory --device cuda --gpu-memory-fraction 0.0001
else
  not_built memory-cap "parbench help memory lists no --gpu-memory-fraction"
fi
# data-parallel --device cuda trains on as many GPUs as --devices asks for: one more than the
# machine has is refused, naming the count; --backend mpi is not offered on the GPU.
if advertises "train on the GPU" data-parallel; then
  error_path data-parallel-devices 2 "asks for $((count + 1)) GPUs, and this machine has $count" \
    "$bin" data-parallel --device cuda --devices "$((count + 1))"
  error_path data-parallel-mpi 2 "--backend mpi is not offered on the GPU" \
    "$bin" data-parallel --device cuda --backend mpi
else
  not_built data-parallel-devices "parbench help data-parallel lists no --device cuda"
fi
if advertises PARBENCH_GPU_INJECT_FAULT; then
  error_path injected-fault 1 "error: " \
    env PARBENCH_GPU_INJECT_FAULT=1 "$bin" async --device cuda
else
  not_built injected-fault "neither parbench --help nor devices --json names PARBENCH_GPU_INJECT_FAULT"
fi

# The timed steps: who else is on the GPU, then clocks, power and throttling every 250 ms.
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$dir/compute-apps.csv" 2>&1 || true
# Newer drivers call the throttle reasons "clock event reasons"; ask by the name this one knows.
reasons=clocks_throttle_reasons.active
if nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv > /dev/null 2>&1; then
  reasons=clocks_event_reasons.active
fi
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,$reasons,utilization.gpu \
  --format=csv -lms 250 > "$dir/gpu-samples.csv" 2>&1 &
sampler=$!

step matmul "$bin" matmul --device cuda --size 8192 --ops 10 -o "$dir/matmul.json"
# Balanced halves, as the book balances its two GPUs: on an H100 the default 6000² takes a
# third of the CPU half's time, and the CPU half (16 threads on a shared host) spreads its
# samples by ±20%, so max(a, b) would measure the CPU's noise rather than the overlap. At
# 9000² the GPU half takes about as long as the CPU half; 15 rounds firm up the medians.
step cpu-gpu "$bin" cpu-gpu --gpu-size 9000 --min-samples 15 -o "$dir/cpu-gpu.json" --trace "$dir/cpu-gpu-trace.json"
step async-host-order "$bin" async --device cuda --gpu-order host -o "$dir/async-host-order.json"
step memory "$bin" memory --device cuda -o "$dir/memory.json"
# The DAG on 2 and 4 compute streams of the GPU: its check compares both schedules pushed at
# once with op by op on the GPU, bit for bit (a failed check exits 1).
step deps-streams-2 "$bin" deps --device cuda --streams 2 -o "$dir/deps-streams-2.json"
step deps-streams-4 "$bin" deps --device cuda --streams 4 -o "$dir/deps-streams-4.json"
# Training on the GPU, eager and as a CUDA graph; its checks (each variant against host SGD)
# fail the step if they fail.
if advertises "train on the GPU" data-parallel; then
  step data-parallel "$bin" data-parallel --device cuda --devices 1 -o "$dir/data-parallel.json"
fi
h2d=0
if advertises --direction run-copy; then h2d=1; fi
# The training job both sides run, spelled out so neither side's defaults can drift apart:
# parbench's data-parallel on the GPU (one-device, one-device-graph) and train-vs-torch.py.
train=0
train_job=(--layers 784x1024x1024x10 --batch 512 --steps 20 --samples 8192 --lr 0.1)
if advertises "--device <VALUE>" data-parallel; then train=1; fi
# parbench and PyTorch alternate, round after round, so a drift of the machine (clocks,
# another tenant) lands on both; the summary gives each goal's ratio per round.
for r in $(seq 1 "$rounds"); do
  rd=round-$r
  mkdir -p "$dir/$rd"
  trace=()
  [ "$r" = 1 ] && trace=(--trace "$dir/run-copy-trace.json")
  step "$rd/run-copy" "$bin" run-copy --size 8192 --ops 10 -o "$dir/$rd/run-copy.json" "${trace[@]}"
  if [ "$h2d" = 1 ]; then
    step "$rd/run-copy-h2d" "$bin" run-copy --direction h2d --size 8192 --ops 10 -o "$dir/$rd/run-copy-h2d.json"
  fi
  step "$rd/async" "$bin" async --device cuda -o "$dir/$rd/async.json"
  step "$rd/hybridize" "$bin" hybridize --device cuda -o "$dir/$rd/hybridize.json"
  step "$rd/torch" python3 "$here/gpu-vs-torch.py" measure "$dir/$rd/torch.json"
  step "$rd/torch-chapter" python3 "$here/gpu-chapter-torch.py" measure "$dir/$rd/torch-chapter.json"
  if [ "$train" = 1 ]; then
    step "$rd/data-parallel" "$bin" data-parallel --device cuda --devices 1 "${train_job[@]}" -o "$dir/$rd/data-parallel.json"
    step "$rd/torch-train" python3 "$here/train-vs-torch.py" measure "$dir/$rd/torch-train.json" "${train_job[@]}"
  fi
done
[ "$h2d" = 1 ] || not_built run-copy-h2d "parbench help run-copy lists no --direction"
[ "$train" = 1 ] || not_built data-parallel-gpu "parbench help data-parallel lists no --device"
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
sampler=

# The committed PTX must be what nvcc makes of the committed source (where nvcc is found),
# for each kernel file.
regenerate_ptx() {
  local name
  for name in elementwise mlp; do
    "$1" -ptx -arch=compute_75 -O3 "$here/$name.cu" -o "$dir/$name.regenerated.ptx" &&
      sed -i 's/^\.version 9\.0$/.version 7.5/' "$dir/$name.regenerated.ptx" &&
      diff -u "$here/$name.ptx" "$dir/$name.regenerated.ptx" &&
      echo "the committed PTX is what $1 makes of $name.cu" || return 1
  done
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
