#!/usr/bin/env bash
# The one command that proves the GPU path, as one prepared call of a few minutes.
#
#   scripts/gpu-check.sh --build     here, with cargo: puts a stripped release binary, the
#                                    library tests as `cargo test` builds them (debug, with
#                                    overflow checks), the scripts they need and COMMIT
#                                    (the short commit, "-dirty" if the tree had changes) into
#                                    target/gpu-check/ (under 60 MiB, checked), nothing else
#   target/gpu-check/gpu-check.sh [--plan first-run|full] [--deadline S] [--dry-run]
#                                 [--out DIR] [--export DIR] [--archive FILE] [--rounds R]
#                                 [--sanitizers]
#                                    on the GPU machine, no cargo: runs the plan's steps in
#                                    three phases, most proof per second first, within one
#                                    deadline (default 390 s from the start; --plan full: 1800):
#     A  correctness of the code never run on a GPU: the GPU's state, NCCL located (nccl.txt),
#        one probe, the library tests, the GPU tests (`#[ignore = "needs a GPU"]`, names
#        starting gpu_) at 4 threads without NCCL, the NCCL tests alone on 1 thread, the error
#        paths, deps --streams 2 and 4, one round of data-parallel --device cuda beside
#        train-vs-torch.py (the same job in PyTorch), memory, hybridize, async and matmul once;
#     B  compute-sanitizer on what changed only: memcheck (stream-ordered race tracking, leak
#        check) on the fixed and the new tests, the random-DAG test last, initcheck on the new
#        tests, racecheck and synccheck on the one kernel with shared memory; NCCL's tests
#        under no tool;
#     C  further rounds of async, hybridize and training against PyTorch while time allows
#        (DIR/round-N/), the PTX regenerated where nvcc is found, the summary.
#                                    Each step gets min(its cap, the time left - 15 s), and is
#                                    skipped (and recorded so) when less than its floor is left
#                                    (a third of its cap, 3 to 20 s); each writes a row to
#                                    DIR/steps.tsv: step, seconds, exit code or "skipped: why".
#                                    After each phase a checkpoint: summary.md written, and with
#                                    --export DIR2 (or --archive FILE) DIR packed into
#                                    DIR2/gpu-check.tgz (a .part, then mv: a kill leaves the last
#                                    whole one); SIGTERM, SIGINT or SIGHUP stop the step running,
#                                    record it and pack. --export DIR2 holds at most 7 files: the
#                                    archive, its .part while packing, kit.log, steps.tsv,
#                                    summary.md, gpu-tests.txt and nccl.txt.
#                                    --dry-run prints the plan, each step's cap and each phase's
#                                    sum (A+B within 300 s for first-run), and needs no GPU, no
#                                    nvidia-smi and no built kit. --plan full is the broad sweep:
#                                    every scenario, R rounds (default 5) of run-copy, async,
#                                    hybridize and training beside PyTorch, and with
#                                    --sanitizers every GPU test under memcheck and initcheck.
#                                    DIR defaults to results/gpu/<gpu-name>-<date>-<commit>;
#                                    the exit is non-zero if a step, test, check or error path
#                                    failed (1), 3 if none failed but a step was skipped for the
#                                    deadline, and refuses in one line with no usable GPU.
#
# A test hook, not for real runs: GPU_CHECK_STAND_IN=SECONDS replaces every step by a sleep of
# SECONDS (within its cap) and needs no GPU and no built kit; GPU_CHECK_STAND_IN_HANG=STEP makes
# that step sleep past its cap. scripts/gpu-check-test.sh kills such a run mid-phase and checks
# that the last checkpoint came back.
set -euo pipefail

if [ "${1:-}" = "--build" ]; then
  cd "$(dirname "$0")/.."
  out=target/gpu-check
  cargo build --release --quiet
  # The library's unit tests in the debug build `cargo test` makes (and CI reuses): overflow
  # checks on, and no second optimized build of the library (it took 108 s on
  # 2 cores; the tests run in 3 s at 4 threads either way). Timed figures come from the release
  # binary, never from the tests. Cargo names the executable in its JSON.
  tests=$(cargo test --lib --no-run --message-format=json 2>/dev/null |
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

# Milliseconds since the epoch (bash 5's EPOCHREALTIME, else date).
now_ms() {
  if [ -n "${EPOCHREALTIME:-}" ]; then
    local t=${EPOCHREALTIME/[.,]/}
    echo $((10#$t / 1000))
  else
    date +%s%3N
  fi
}
t0_ms=$(now_ms)

here=$(cd "$(dirname "$0")" && pwd)
bin=$here/parbench
tests=$here/parbench-lib-tests

plan=first-run deadline='' dry=0 dir='' export_dir='' archive='' rounds='' sanitizers=0
usage="--plan first-run|full, --deadline S, --dry-run, --out DIR, --export DIR, --archive FILE, --rounds R, --sanitizers"
while [ $# -gt 0 ]; do
  case $1 in
    --plan) plan=${2:?--plan needs first-run or full}; shift 2 ;;
    --deadline) deadline=${2:?--deadline needs seconds}; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --out) dir=${2:?--out needs a directory}; shift 2 ;;
    --export) export_dir=${2:?--export needs a directory}; shift 2 ;;
    --archive) archive=${2:?--archive needs a file}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    --sanitizers) sanitizers=1; shift ;;
    *) echo "error: unknown option '$1' ($usage)" >&2; exit 2 ;;
  esac
done
case $plan in
  first-run) deadline=${deadline:-390} rounds=${rounds:-5} ;;
  full) deadline=${deadline:-1800} rounds=${rounds:-5} ;;
  *) echo "error: --plan is first-run or full, not '$plan'" >&2; exit 2 ;;
esac
case $rounds in
  '' | *[!0-9]* | 0) echo "error: --rounds takes a whole number of at least 1, not '$rounds'" >&2; exit 2 ;;
esac
case $deadline in
  '' | *[!0-9]*) echo "error: --deadline takes whole seconds, not '$deadline'" >&2; exit 2 ;;
esac
[ "$deadline" -ge 30 ] || { echo "error: --deadline $deadline leaves no room for a step (at least 30 s)" >&2; exit 2; }
deadline_ms=$((t0_ms + deadline * 1000))
# Kept back from every step for the checkpoint that packs what the run has.
MARGIN=15
# The sum of phase A's and B's caps a first run must keep within.
AB_LIMIT=300

stand_in=${GPU_CHECK_STAND_IN:-}
hang=${GPU_CHECK_STAND_IN_HANG:-}
if [ -n "$stand_in" ]; then
  case $stand_in in
    *[!0-9.]* | .) echo "error: GPU_CHECK_STAND_IN takes seconds, not '$stand_in'" >&2; exit 2 ;;
  esac
fi

# The tests first run at this commit, by name, so a rename cannot drop them unseen: deps'
# k-stream tests, data-parallel's GPU training (and its trainer dropped with the last reference
# to its device), the GPU path's chains, async's GPU times and the refusal of a missing ordinal. The random-DAG test is memcheck's last; NCCL's run alone.
NEW_TESTS=(
  gpu_streams_order_a_consumer_after_its_producer
  gpu_mlp_kernels_equal_their_host_references
  gpu_mlp_products_with_transposes_equal_the_hosts
  gpu_training_equals_host_sgd_eager_and_graphed
  gpu_training_with_a_planted_error_fails_the_check
  gpu_chains_copies_and_layers_give_the_hosts_results
  gpu_async_records_the_gpu_times
  gpu_a_missing_ordinal_is_refused_not_opened
  gpu_a_trainer_holding_its_device_alone_drops_cleanly
)
DAG_TEST=gpu_deps_random_dags_match_op_by_op_bit_for_bit
# Tests fixed since the last run on a GPU (memcheck reported their reads before allocation).
FIXED_TESTS=(
  gpu_memory_cap_refuses_an_allocation_past_it
  gpu_pool_usage_reports_reserved_and_used
  gpu_the_caching_allocator_reuses_blocks_and_gives_them_back_for_room
)
# The one kernel with shared memory (record_loss's reduction) is run by this test.
SHARED_MEMORY_TEST=gpu_mlp_kernels_equal_their_host_references
# The training job both sides run, spelled out so neither side's defaults can drift apart.
TRAIN_JOB=(--layers 784x1024x1024x10 --batch 512 --steps 20 --samples 8192 --lr 0.1)

# ---------------------------------------------------------------------------------------------
# Steps: run within the deadline, recorded in steps.tsv, or printed by --dry-run.

phase='' phase_title=''
declare -A phase_caps=()
phase_order=()
current_pid='' current_name='' current_t0=0 current_rc='' current_cap='' bg_before=
sampler=''

say() { # a line of the kit's log, on stdout too
  if [ "$dry" = 1 ]; then echo "$*"; else printf '%s\n' "$*" | tee -a "$dir/kit.log"; fi
}

left_s() { # seconds to the deadline, less the margin
  echo $(((deadline_ms - $(now_ms)) / 1000 - MARGIN))
}

elapsed_s() { # seconds since a time in ms, to a tenth
  local ms=$(($(now_ms) - $1))
  printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100))
}

record() { # step, seconds, result: a row of steps.tsv
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$phase" "${4:-}" >> "$dir/steps.tsv"
}

begin_phase() { # letter, title
  phase=$1 phase_title=$2
  phase_caps[$phase]=0
  phase_order+=("$phase")
  if [ "$dry" = 1 ]; then
    echo
    echo "phase $phase: $phase_title"
  else
    say "=== phase $phase: $phase_title ($(($(now_ms) / 1000 - t0_ms / 1000)) s in, $(left_s) s left before the margin)"
  fi
}

end_phase() {
  if [ "$dry" = 1 ]; then
    echo "phase $phase: ${phase_caps[$phase]} s of caps"
  else
    checkpoint "phase $phase"
  fi
}

skip() { # step, why
  if [ "$dry" = 1 ]; then
    printf '  %s  %-44s  skipped: %s\n' "$phase" "$1" "$2"
    return 0
  fi
  say "== $1: skipped: $2"
  record "$1" 0 "skipped: $2"
}

# A step: name (its output goes to DIR/name.txt), cap in seconds, then the command (a function
# of this script or a program). Returns the step's exit code (0 when skipped).
step() {
  local name=$1 cap=$2
  shift 2
  if [ "$dry" = 1 ]; then
    phase_caps[$phase]=$((phase_caps[$phase] + cap))
    local shown="$*"
    shown=${shown//$here\//}
    printf '  %s  %-44s %4d s  %s\n' "$phase" "$name" "$cap" "${shown:0:100}"
    return 0
  fi
  local left give need
  left=$(left_s)
  need=$((cap / 3))
  [ "$need" -ge 3 ] || need=3
  [ "$need" -le 20 ] || need=20
  [ "$need" -le "$cap" ] || need=$cap
  if [ "$left" -lt "$need" ]; then
    say "== $name: skipped: deadline (${left} s left after the ${MARGIN} s margin; its floor is ${need} s)"
    record "$name" 0 "skipped: deadline" "$cap"
    return 0
  fi
  give=$cap
  [ "$give" -le "$left" ] || give=$left
  # What the trap needs to record the step and stop it, whenever a signal comes (bash runs
  # traps between commands: before the step starts, before its pid is known, after it ended).
  # Set before the step's line is logged: a signal just after that line still finds the step.
  current_t0=$(now_ms) current_name=$name current_cap=$cap current_rc='' bg_before=${!:-}
  say "== $name (cap ${give} s)"
  mkdir -p "$(dirname "$dir/$name.txt")"
  local -a cmd=("$@")
  if [ -n "$stand_in" ]; then
    if [ "$name" = "$hang" ]; then cmd=(sleep 100000); else cmd=(sleep "$stand_in"); fi
  elif declare -F "$1" > /dev/null; then
    cmd=(bash -c "$FUNCS"$'\n''"$@"' gpu-check "$@")
  fi
  local rc=0
  # In the background, so that a signal to the kit is handled at once (bash runs a trap only
  # once the foreground command ends); timeout puts the step in a process group of its own
  # and signals the whole group.
  timeout --kill-after=5 "$give" "${cmd[@]}" > "$dir/$name.txt" 2>&1 &
  current_pid=$!
  wait "$current_pid" || rc=$?
  current_rc=$rc current_pid=''
  local secs
  secs=$(elapsed_s "$current_t0")
  record "$name" "$secs" "$rc" "$cap"
  current_name=
  if [ "$rc" = 0 ]; then
    say "   ok in $secs s"
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    say "   FAILED: cut off at its cap of $give s (exit $rc; see $name.txt)"
  else
    say "   FAILED: exit $rc in $secs s (see $name.txt)"
  fi
  tail -n 3 "$dir/$name.txt" | sed 's/^/   /' | tee -a "$dir/kit.log"
  return 0
}

# Seconds a step took (its row), or '' when it did not run.
seconds_of() {
  awk -F '\t' -v s="$1" '$1 == s && $3 ~ /^[0-9]+$/ { r = $2 } END { print r }' "$dir/steps.tsv"
}

# ---------------------------------------------------------------------------------------------
# Checkpoints: the summary, and DIR packed where the caller collects it.

LOOSE=(kit.log steps.tsv summary.md gpu-tests.txt nccl.txt)
checkpoint() { # label
  [ "$dry" = 1 ] && return 0
  timeout 10 python3 "$here/gpu-vs-torch.py" summary "$dir" > /dev/null 2>> "$dir/kit.log" || true
  local f part
  if [ -n "$export_dir" ]; then
    # One at a time through one .part, so the folder never holds more than 7 files.
    part=$export_dir/gpu-check.tgz.part
    for f in "${LOOSE[@]}"; do
      if [ -f "$dir/$f" ]; then
        { cp "$dir/$f" "$part" && mv -f "$part" "$export_dir/$f"; } || rm -f "$part"
      fi
    done
  fi
  if [ -n "$archive" ]; then
    if tar -czf "$archive.part" -C "$(dirname "$dir")" "$(basename "$dir")" 2>> "$dir/kit.log" &&
      mv -f "$archive.part" "$archive"; then
      say "== checkpoint ($1): packed $dir into $archive ($(du -h "$archive" | cut -f 1))"
    else
      rm -f "$archive.part"
      say "== checkpoint ($1): could not pack $dir into $archive"
    fi
  fi
}

stop_sampler() {
  if [ -n "$sampler" ]; then
    kill "$sampler" 2> /dev/null || true
    wait "$sampler" 2> /dev/null || true
    sampler=''
  fi
}

# Clocks, power and throttling every 250 ms over the timed steps (the header only once).
start_sampler() {
  [ -z "$stand_in" ] && [ "$dry" = 0 ] && [ -z "$sampler" ] || return 0
  local reasons=clocks_throttle_reasons.active format=csv
  # Newer drivers call the throttle reasons "clock event reasons"; ask by the name this one knows.
  if nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv > /dev/null 2>&1; then
    reasons=clocks_event_reasons.active
  fi
  [ -s "$dir/gpu-samples.csv" ] && format=csv,noheader
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,$reasons,utilization.gpu \
    --format=$format -lms 250 >> "$dir/gpu-samples.csv" 2>&1 &
  sampler=$!
}

finished=0
wrap_up() { # the GPU after, the last checkpoint
  [ "$finished" = 1 ] && return 0
  finished=1
  # A second signal must not cut the last checkpoint short.
  trap '' TERM INT HUP
  stop_sampler
  if [ -z "$stand_in" ]; then
    timeout 10 nvidia-smi -q > "$dir/nvidia-smi-after.txt" 2>&1 || true
  fi
  checkpoint "${1:-end}"
}

on_signal() { # name, number
  trap '' TERM INT HUP
  if [ -n "$current_name" ]; then
    if [ -n "$current_rc" ]; then
      # The step had ended: its own result (a repeated row is the same row).
      record "$current_name" "$(elapsed_s "$current_t0")" "$current_rc" "$current_cap"
    else
      local pid=$current_pid
      # Started, its pid not yet kept: the last background job is the step.
      [ -n "$pid" ] || [ "${!:-}" = "$bg_before" ] || pid=$!
      if [ -n "$pid" ]; then
        kill -TERM "$pid" 2> /dev/null || true
        wait "$pid" 2> /dev/null || true
      fi
      record "$current_name" "$(elapsed_s "$current_t0")" "killed: SIG$1" "$current_cap"
    fi
    current_name='' current_pid=''
  fi
  say "== SIG$1 after $((($(now_ms) - t0_ms) / 1000)) s: the run stops here; packing what it has"
  wrap_up "SIG$1"
  exit $((128 + $2))
}

# ---------------------------------------------------------------------------------------------
# The steps that are more than one command (run by `step` in a bash of their own).

advertises() { # word [scenario]: whether the binary has a feature (one place to change how)
  [ "$dry" = 1 ] || [ -n "$stand_in" ] && return 0
  local text # whole, before grep -q: with pipefail a writer cut off by grep would fail the pipe
  text=$({ "$bin" --help; "$bin" devices --json; [ -z "${2:-}" ] || "$bin" help "$2"; } 2> /dev/null || true)
  grep -qF -- "$1" <<< "$text"
}

record_state() { # the GPU before: nvidia-smi, parbench's view, other compute processes
  nvidia-smi -q > "$dir/nvidia-smi-before.txt" 2>&1
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$dir/compute-apps.csv" 2>&1
  "$bin" devices > "$dir/devices.txt" && "$bin" devices --json > "$dir/devices.json" &&
    cat "$dir/devices.txt"
}

probe_once() { # the machine's limits, the GPU's among them
  "$bin" devices --probe --json > "$dir/devices-probe.json"
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print("probe:", ", ".join(sorted(d)))' "$dir/devices-probe.json"
}

# Where libnccl.so.2 is, as parbench looks and more: the loader's cache, LD_LIBRARY_PATH, the
# CUDA folders, and pip's wheels (site-packages/nvidia/nccl/lib, what PyTorch's cu12 and cu13
# wheels ship) of VIRTUAL_ENV, CONDA_PREFIX, every <prefix>/bin on PATH (a venv never
# activated) and the python3 on PATH. Writes DIR/nccl.txt; its first line is "found: PATH" or
# "missing: ...".
locate_nccl() {
  local -a dirs=() prefixes=() entries=()
  local d p found='' how='' cached
  cached=$(ldconfig -p 2> /dev/null | awk '$1 == "libnccl.so.2" { print $NF; exit }' || true)
  IFS=: read -ra entries <<< "${LD_LIBRARY_PATH:-}"
  dirs+=(${entries[@]+"${entries[@]}"})
  for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}"; do [ -z "$d" ] || dirs+=("$d/lib64" "$d/lib"); done
  dirs+=(/usr/local/cuda/lib64 /usr/local/cuda-*/lib64)
  [ -z "${VIRTUAL_ENV:-}" ] || prefixes+=("$VIRTUAL_ENV")
  [ -z "${CONDA_PREFIX:-}" ] || prefixes+=("$CONDA_PREFIX")
  IFS=: read -ra entries <<< "${PATH:-}"
  for d in ${entries[@]+"${entries[@]}"}; do
    [ "$(basename "$d")" = bin ] && prefixes+=("$(dirname "$d")")
  done
  prefixes+=(/usr /usr/local /opt/conda "${HOME:-/root}/.local")
  for p in "${prefixes[@]}"; do
    for d in "$p"/lib/python3*/site-packages "$p"/lib/python3*/dist-packages; do
      dirs+=("$d/nvidia/nccl/lib")
    done
  done
  # The python3 on PATH, asked where its packages are (a venv's, a user's).
  if command -v python3 > /dev/null; then
    while IFS= read -r d; do
      [ -n "$d" ] && dirs+=("$d/nvidia/nccl/lib")
    done < <(timeout 10 python3 -c 'import site, sys
print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2> /dev/null || true)
  fi
  dirs+=(/usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /opt/conda/lib)
  local -a searched=()
  for d in "${dirs[@]}"; do
    case " ${searched[*]-} " in *" $d "*) continue ;; esac
    searched+=("$d")
    if [ -z "$found" ] && [ -e "$d/libnccl.so.2" ]; then found=$d/libnccl.so.2 how="in $d"; fi
  done
  if [ -z "$found" ] && [ -n "$cached" ]; then found=$cached how="in the loader's cache (ldconfig -p)"; fi
  {
    if [ -n "$found" ]; then
      echo "found: $found"
      echo "how: $how; $(readlink -f "$found" 2> /dev/null || echo "$found")"
    else
      echo "missing: libnccl.so.2 is in none of ${#searched[@]} places searched, nor in the loader's cache; pip install nvidia-nccl-cu13 (or -cu12)"
    fi
    echo "loader's cache: ${cached:-none}"
    echo "python3 on PATH: $(command -v python3 || echo none); VIRTUAL_ENV=${VIRTUAL_ENV:-unset}"
    echo "searched:"
    printf '  %s\n' "${searched[@]}"
  } > "$dir/nccl.txt"
  head -n 2 "$dir/nccl.txt"
}

gpu_tests() { # the GPU tests at 4 threads, NCCL's left out; the first-run ones by name
  local -a skips=(--skip gpu_nccl_)
  "$tests" --ignored gpu_ "${skips[@]}" --test-threads 4 || return $?
  local rc=0 t
  if ! grep -q '^running [1-9]' "$dir/gpu-tests.txt"; then
    echo "FAILED: no GPU test ran"
    rc=1
  fi
  for t in "${NEW_TESTS[@]}" "$DAG_TEST" "${FIXED_TESTS[@]}"; do
    if ! grep -q "$t \.\.\. ok" "$dir/gpu-tests.txt"; then
      echo "FAILED: $t did not pass"
      rc=1
    fi
  done
  return $rc
}

nccl_tests() { # NCCL's tests alone, one thread; the two-GPU one where the driver lists two
  local -a multi=(--skip gpu_nccl_allreduce_on_two_gpus)
  local gpus
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ' || true)
  [ "${gpus:-0}" -ge 2 ] && multi=()
  "$tests" --ignored gpu_nccl_ ${multi[@]+"${multi[@]}"} --test-threads 1
}

# An error path: the command must exit with the code given, within 15 s, with one line on
# stderr that contains every needle. Each verdict is a line of DIR/error-paths.tsv.
error_path() { # name, exit code wanted, needles (|-separated), then the command
  local name=$1 want=$2 needles=$3 rc=0 verdict=ok detail
  shift 3
  timeout --kill-after=5 15 "$@" > "$dir/error-$name.out" 2> "$dir/error-$name.txt" || rc=$?
  local lines
  lines=$(grep -c '' "$dir/error-$name.txt" || true)
  detail="exit $rc, $lines line(s): $(head -n 1 "$dir/error-$name.txt")"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    verdict=FAILED detail="no answer within 15 s (hung)"
  elif [ "$rc" != "$want" ] || [ "$lines" != 1 ] || grep -q panicked "$dir/error-$name.txt"; then
    verdict=FAILED detail="wanted exit $want and one line; $detail"
  else
    local needle
    IFS='|' read -ra parts <<< "$needles"
    for needle in "${parts[@]}"; do
      grep -qF -- "$needle" "$dir/error-$name.txt" || { verdict=FAILED detail="no '$needle'; $detail"; }
    done
  fi
  printf '%s\t%s\t%s\n' "$name" "$verdict" "$(printf '%s' "$detail" | tr '\t' ' ')" >> "$dir/error-paths.tsv"
  echo "$name: $verdict: $detail"
  [ "$verdict" = ok ]
}
not_built() { # name, what is missing
  echo "$1: not built ($2)"
  printf '%s\tnot built\t%s\n' "$1" "$2" >> "$dir/error-paths.tsv"
}

error_paths() { # each one line, the right exit code, no hang
  local rc=0 count
  printf 'path\tverdict\tdetail\n' > "$dir/error-paths.tsv"
  error_path hidden-gpu 2 "GPU|CUDA_VISIBLE_DEVICES is ''" \
    env CUDA_VISIBLE_DEVICES= "$bin" async --device cuda || rc=1
  count=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1])).get("gpus", [])))' "$dir/devices.json")
  error_path missing-ordinal 2 "no GPU $count: this machine has $count" \
    "$bin" --gpu "$count" async --device cuda || rc=1
  if advertises --gpu-memory-fraction memory; then
    error_path memory-cap 1 "GPU memory cap" \
      "$bin" memory --device cuda --gpu-memory-fraction 0.0001 || rc=1
  else
    not_built memory-cap "parbench help memory lists no --gpu-memory-fraction"
  fi
  # data-parallel --device cuda trains on as many GPUs as --devices asks for: one more than the
  # machine has is refused, naming the count; --backend mpi is not offered on the GPU.
  if advertises "train on the GPU" data-parallel; then
    error_path data-parallel-devices 2 "asks for $((count + 1)) GPUs, and this machine has $count" \
      "$bin" data-parallel --device cuda --devices "$((count + 1))" || rc=1
    error_path data-parallel-mpi 2 "--backend mpi is not offered on the GPU" \
      "$bin" data-parallel --device cuda --backend mpi || rc=1
  else
    not_built data-parallel-devices "parbench help data-parallel lists no --device cuda"
  fi
  if advertises PARBENCH_GPU_INJECT_FAULT; then
    error_path injected-fault 1 "error: " \
      env PARBENCH_GPU_INJECT_FAULT=1 "$bin" async --device cuda || rc=1
  else
    not_built injected-fault "neither parbench --help nor devices --json names PARBENCH_GPU_INJECT_FAULT"
  fi
  return $rc
}

# The committed PTX must be what nvcc makes of the committed source, for each kernel file.
regenerate_ptx() { # nvcc
  local name
  for name in elementwise mlp; do
    "$1" -ptx -arch=compute_75 -O3 "$here/$name.cu" -o "$dir/$name.regenerated.ptx" &&
      sed -i 's/^\.version 9\.0$/.version 7.5/' "$dir/$name.regenerated.ptx" &&
      diff -u "$here/$name.ptx" "$dir/$name.regenerated.ptx" &&
      echo "the committed PTX is what $1 makes of $name.cu" || return 1
  done
}

# compute-sanitizer TOOL over the tests named (serially: one test's reports must not interleave
# with another's; --nocapture: a failure under the tool shows its message even if the process
# dies). NCCL's tests never run under a tool.
sanitize() { # tool, then test names
  local tool=$1
  shift
  local -a opts=(--tool "$tool" --error-exitcode 99)
  # Stream-ordered race tracking: a use of memory after its cuMemFreeAsync, or before its
  # cuMemAllocAsync, in stream order.
  [ "$tool" = memcheck ] && opts+=(--leak-check full --track-stream-ordered-races all)
  "$sanitizer" "${opts[@]}" "$tests" --ignored --skip gpu_nccl_ --skip gpu_limits_are_measured \
    --test-threads 1 --nocapture "$@"
}

# ---------------------------------------------------------------------------------------------
# The plans.

# parbench and PyTorch on the same round: async and hybridize beside PyTorch's chapter figures,
# the training job beside train-vs-torch.py.
round_steps() { # round folder
  local rd=$1
  step "$rd/async" 8 "$bin" async --device cuda -o "$dir/$rd/async.json"
  step "$rd/hybridize" 8 "$bin" hybridize --device cuda -o "$dir/$rd/hybridize.json"
  step "$rd/torch-chapter" 30 python3 "$here/gpu-chapter-torch.py" measure "$dir/$rd/torch-chapter.json"
  training_steps "$rd"
}
training_steps() { # round folder
  local rd=$1
  if advertises "--device <VALUE>" data-parallel; then
    step "$rd/data-parallel" 40 "$bin" data-parallel --device cuda --devices 1 "${TRAIN_JOB[@]}" -o "$dir/$rd/data-parallel.json"
    step "$rd/torch-train" 35 python3 "$here/train-vs-torch.py" measure "$dir/$rd/torch-train.json" "${TRAIN_JOB[@]}"
  else
    skip "$rd/data-parallel" "not built: parbench help data-parallel lists no --device"
  fi
}
ROUND_STEPS=(async hybridize torch-chapter data-parallel torch-train)

sanitizer_steps_first_run() {
  if [ "$dry" = 0 ] && [ -z "$stand_in" ] && [ -z "$sanitizer" ]; then
    skip sanitizers "no compute-sanitizer on this machine (PATH, /usr/local/cuda/bin)"
    return 0
  fi
  step sanitizer-memcheck-fixed 12 sanitize memcheck "${FIXED_TESTS[@]}"
  step sanitizer-memcheck-new 33 sanitize memcheck "${NEW_TESTS[@]}"
  step sanitizer-memcheck-dags 12 sanitize memcheck "$DAG_TEST"
  step sanitizer-initcheck-new 18 sanitize initcheck "${NEW_TESTS[@]}"
  step sanitizer-racecheck-mlp 8 sanitize racecheck "$SHARED_MEMORY_TEST"
  step sanitizer-synccheck-mlp 8 sanitize synccheck "$SHARED_MEMORY_TEST"
}

ptx_and_summary() {
  if [ "$dry" = 1 ] || [ -n "$stand_in" ] || [ -n "$nvcc" ]; then
    step ptx 15 regenerate_ptx "${nvcc:-nvcc}"
  else
    skip ptx "no nvcc on this machine: the committed PTX was not regenerated"
  fi
  step summary 10 python3 "$here/gpu-vs-torch.py" summary "$dir"
}

plan_first_run() {
  begin_phase A "correctness of the code never run on a GPU"
  step state 6 record_state
  step locate-nccl 4 locate_nccl
  step probe 10 probe_once
  step tests 10 "$tests" --test-threads 4
  step gpu-tests 24 gpu_tests
  if [ "$dry" = 1 ] || [ -n "$stand_in" ] || grep -q '^found: ' "$dir/nccl.txt" 2> /dev/null; then
    step nccl-tests 12 nccl_tests
    [ "$dry" = 1 ] || { echo "NCCL tests:"; grep -E '^test |^test result|^Error' "$dir/nccl-tests.txt" || true; } >> "$dir/nccl.txt"
  else
    skip nccl-tests "no NCCL: libnccl.so.2 not found (see nccl.txt)"
  fi
  step error-paths 16 error_paths
  start_sampler
  step deps-streams-2 10 "$bin" deps --device cuda --streams 2 -o "$dir/deps-streams-2.json"
  step deps-streams-4 10 "$bin" deps --device cuda --streams 4 -o "$dir/deps-streams-4.json"
  training_steps round-1
  step memory 8 "$bin" memory --device cuda -o "$dir/memory.json"
  step round-1/hybridize 8 "$bin" hybridize --device cuda -o "$dir/round-1/hybridize.json"
  step round-1/async 8 "$bin" async --device cuda -o "$dir/round-1/async.json"
  step matmul 8 "$bin" matmul --device cuda --size 8192 --ops 10 -o "$dir/matmul.json"
  stop_sampler
  end_phase

  begin_phase B "compute-sanitizer on what changed: memcheck on the fixed and new tests (the random-DAG test last), initcheck on the new, racecheck and synccheck on the shared-memory kernel; NCCL under no tool"
  sanitizer_steps_first_run
  end_phase

  begin_phase C "further rounds beside PyTorch while time allows, the PTX, the summary"
  start_sampler
  step round-1/torch-chapter 30 python3 "$here/gpu-chapter-torch.py" measure "$dir/round-1/torch-chapter.json"
  step round-1/torch 25 python3 "$here/gpu-vs-torch.py" measure "$dir/round-1/torch.json"
  if [ "$dry" = 1 ]; then
    echo "  C  round-N/{$(IFS=,; echo "${ROUND_STEPS[*]}")}, N = 2..$rounds: each round only while its measured round-1 time fits"
    local saved=${phase_caps[C]}
    round_steps "round-N"
    round_caps=$((phase_caps[C] - saved))
    echo "  C  (one further round: $round_caps s of caps, not in phase C's sum)"
    phase_caps[C]=$saved
  else
    local r est s t cap need_after
    for r in $(seq 2 "$rounds"); do
      # A round's estimate: round 1's own seconds, plus a fifth; a step without them, its cap.
      est=0
      for s in "${ROUND_STEPS[@]}"; do
        t=$(seconds_of "round-1/$s")
        case $s in torch-chapter) cap=30 ;; data-parallel) cap=40 ;; torch-train) cap=35 ;; *) cap=8 ;; esac
        if [ -n "$t" ]; then est=$((est + ${t%.*} + 1)); else est=$((est + cap)); fi
      done
      est=$((est + est / 5))
      need_after=25 # the PTX and the summary
      if [ "$(left_s)" -lt $((est + need_after)) ]; then
        say "== rounds $r..$rounds not started: $(left_s) s left, a round takes about $est s and the PTX and summary $need_after s"
        break
      fi
      mkdir -p "$dir/round-$r"
      round_steps "round-$r"
    done
  fi
  stop_sampler
  ptx_and_summary
  end_phase
}

plan_full() {
  begin_phase A "every check and scenario once"
  step state 6 record_state
  step locate-nccl 4 locate_nccl
  step probe 30 probe_once
  step tests 60 "$tests" --test-threads 4
  step gpu-tests 120 gpu_tests
  if [ "$dry" = 1 ] || [ -n "$stand_in" ] || grep -q '^found: ' "$dir/nccl.txt" 2> /dev/null; then
    step nccl-tests 60 nccl_tests
  else
    skip nccl-tests "no NCCL: libnccl.so.2 not found (see nccl.txt)"
  fi
  step error-paths 60 error_paths
  start_sampler
  step matmul 30 "$bin" matmul --device cuda --size 8192 --ops 10 -o "$dir/matmul.json"
  # Balanced halves, as the book balances its two GPUs: at the default 6000² the GPU half takes
  # a third of the CPU half's time, so max(a, b) would measure the CPU's noise; at 9000² the
  # halves take about as long; 15 rounds firm up the medians.
  step cpu-gpu 60 "$bin" cpu-gpu --gpu-size 9000 --min-samples 15 -o "$dir/cpu-gpu.json" --trace "$dir/cpu-gpu-trace.json"
  step async-host-order 30 "$bin" async --device cuda --gpu-order host -o "$dir/async-host-order.json"
  step memory 30 "$bin" memory --device cuda -o "$dir/memory.json"
  step deps-streams-2 60 "$bin" deps --device cuda --streams 2 -o "$dir/deps-streams-2.json"
  step deps-streams-4 60 "$bin" deps --device cuda --streams 4 -o "$dir/deps-streams-4.json"
  stop_sampler
  end_phase

  begin_phase B "compute-sanitizer on every GPU test (--sanitizers)"
  if [ "$sanitizers" = 0 ]; then
    skip sanitizers "not asked for (--sanitizers)"
  elif [ "$dry" = 0 ] && [ -z "$stand_in" ] && [ -z "$sanitizer" ]; then
    skip sanitizers "no compute-sanitizer on this machine (PATH, /usr/local/cuda/bin)"
  else
    step sanitizer-memcheck 600 sanitize memcheck gpu_
    step sanitizer-initcheck 600 sanitize initcheck gpu_
    step sanitizer-racecheck 300 sanitize racecheck gpu_dependent_chains
    step sanitizer-racecheck-mlp 120 sanitize racecheck "$SHARED_MEMORY_TEST"
  fi
  end_phase

  begin_phase C "$rounds rounds of parbench beside PyTorch, the PTX, the summary"
  start_sampler
  local r h2d=0 trace
  advertises --direction run-copy && h2d=1
  for r in $(seq 1 "$rounds"); do
    local rd=round-$r
    [ "$dry" = 1 ] || mkdir -p "$dir/$rd"
    trace=()
    [ "$r" = 1 ] && trace=(--trace "$dir/run-copy-trace.json")
    step "$rd/run-copy" 30 "$bin" run-copy --size 8192 --ops 10 -o "$dir/$rd/run-copy.json" "${trace[@]}"
    if [ "$h2d" = 1 ]; then
      step "$rd/run-copy-h2d" 30 "$bin" run-copy --direction h2d --size 8192 --ops 10 -o "$dir/$rd/run-copy-h2d.json"
    fi
    step "$rd/torch" 30 python3 "$here/gpu-vs-torch.py" measure "$dir/$rd/torch.json"
    round_steps "$rd"
  done
  stop_sampler
  ptx_and_summary
  end_phase
}

# ---------------------------------------------------------------------------------------------

if [ "$dry" = 1 ]; then
  sanitizer='' nvcc='' dir=DIR round_caps=0
  echo "plan $plan: a deadline of $deadline s; each step gets min(its cap, the time left - $MARGIN s) and is skipped when less than its floor (a third of its cap, 3 to 20 s) is left; a checkpoint after each phase"
  "plan_${plan//-/_}"
  echo
  line="caps:"
  for p in "${phase_order[@]}"; do line+=" $p=${phase_caps[$p]}"; done
  ab=$((${phase_caps[A]:-0} + ${phase_caps[B]:-0}))
  if [ "$plan" = first-run ]; then
    line+=" A+B=$ab (C: round 1's PyTorch figures, the PTX and the summary; a further round, $round_caps s of caps, starts only while its measured time fits)"
  else
    line+=" A+B=$ab"
  fi
  echo "$line"
  if [ "$plan" = first-run ] && [ "$ab" -gt "$AB_LIMIT" ]; then
    echo "error: phases A and B take $ab s of caps, over the $AB_LIMIT s a first run has for them" >&2
    exit 1
  fi
  exit 0
fi

if [ -n "$stand_in" ]; then
  gpu="stand-in" commit=stand-in
else
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
  commit=$(cat "$here/COMMIT" 2> /dev/null || echo unknown)
fi
slug=$(printf '%s' "$gpu" | tr -cs 'A-Za-z0-9' '-' | sed 's/^-//; s/-$//' | tr 'A-Z' 'a-z')
dir=${dir:-results/gpu/$slug-$(date -u +%Y-%m-%d)-$commit}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -n "$export_dir" ]; then
  mkdir -p "$export_dir"
  export_dir=$(cd "$export_dir" && pwd)
  case $dir/ in
    "$export_dir"/*) echo "error: --out $dir lies inside --export $export_dir, which holds only the few files a device returns" >&2; exit 2 ;;
  esac
  archive=${archive:-$export_dir/gpu-check.tgz}
fi
if [ -n "$archive" ]; then
  mkdir -p "$(dirname "$archive")"
  archive=$(cd "$(dirname "$archive")" && pwd)/$(basename "$archive")
fi
rm -f "$dir/steps.tsv" "$dir/kit.log"
printf 'step\tseconds\tresult\tphase\tcap\n' > "$dir/steps.tsv"
echo "$commit" > "$dir/COMMIT"
echo "$plan" > "$dir/PLAN"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null || true)
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2> /dev/null || true)
export dir bin tests here sanitizer stand_in dry
trap 'on_signal TERM 15' TERM
trap 'on_signal INT 2' INT
trap 'on_signal HUP 1' HUP
trap 'wrap_up exit' EXIT
# The functions a step runs in a bash of its own.
FUNCS=$(declare -f; declare -p NEW_TESTS FIXED_TESTS DAG_TEST)
say "GPU: $gpu; kit built at $commit; plan $plan, deadline $deadline s; reports in $dir${archive:+, packed into $archive}${stand_in:+ (stand-in steps: GPU_CHECK_STAND_IN=$stand_in)}"

"plan_${plan//-/_}"

failed=$(awk -F '\t' 'NR > 1 && $3 != "0" && $3 !~ /^skipped/ { print $1 }' "$dir/steps.tsv" | tr '\n' ' ')
late=$(awk -F '\t' 'NR > 1 && $3 == "skipped: deadline" { print $1 }' "$dir/steps.tsv" | tr '\n' ' ')
rc=0
if [ -n "$failed" ]; then
  say "FAILED: $failed"
  rc=1
elif [ -n "$late" ]; then
  say "passed, but skipped for the deadline: $late"
  rc=3
else
  say "passed: every step of plan $plan ran and passed"
fi
say "done in $((($(now_ms) - t0_ms) / 1000)) s of the $deadline s deadline"
wrap_up end
trap - EXIT
[ -n "$stand_in" ] || cat "$dir/summary.md" 2> /dev/null || true
exit $rc
