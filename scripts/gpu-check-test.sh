#!/usr/bin/env bash
# The GPU check kit's own tests, on a machine without a GPU (CI runs them; about 15 s):
#
#   bash scripts/gpu-check-test.sh [KIT]     KIT: scripts/gpu-check.sh (default) or a built kit's
#
# - the dry run: needs no GPU, no nvidia-smi (one on PATH that fails the test if called) and no
#   built kit; phases A, B and C in that order; a first run's A and B within 300 s of caps;
# - a kill in the middle returns the last checkpoint: the kit with stand-in steps
#   (GPU_CHECK_STAND_IN, its test hook: each step a short sleep, one step hanging) is stopped
#   while phase B hangs, by SIGTERM through timeout (the trap records the step and packs) and by
#   SIGKILL (no trap: the checkpoint after phase A is what comes back, whole); the export folder
#   holds at most 7 files and no .part;
# - the deadline: a step that hangs is cut at min(its cap, the time left - 15 s), the steps that
#   no longer fit are recorded "skipped: deadline", and the summary shows them as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${1:-scripts/gpu-check.sh}
work=$(mktemp -d)
pids=()
cleanup() {
  local p
  for p in ${pids[@]+"${pids[@]}"}; do kill -KILL "$p" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
# GPU_CHECK_TEST_KEEP=1 keeps the runs' folders to look at.
[ -z "${GPU_CHECK_TEST_KEEP:-}" ] || { trap - EXIT; echo "gpu-check-test: the runs are in $work"; }
fail() { echo "gpu-check-test: FAILED: $*" >&2; exit 1; }
passed=0
ok() { passed=$((passed + 1)); echo "gpu-check-test: ok: $*"; }

# An nvidia-smi that must never be called: not by the dry run, not by stand-in steps.
mkdir -p "$work/bin"
cat > "$work/bin/nvidia-smi" << EOF
#!/bin/sh
touch "$work/nvidia-smi-called"
exit 9
EOF
chmod +x "$work/bin/nvidia-smi"
export PATH="$work/bin:$PATH"

# --- the dry run ------------------------------------------------------------------------------
bash "$kit" --dry-run > "$work/plan.txt" 2>&1 || { cat "$work/plan.txt"; fail "--dry-run exited non-zero"; }
[ ! -e "$work/nvidia-smi-called" ] || fail "--dry-run called nvidia-smi"
phases=$(sed -n 's/^phase \([A-Z]\): .* s of caps$/\1/p' "$work/plan.txt" | tr -d '\n')
[ "$phases" = ABC ] || fail "the plan's phases are '$phases', not A, B, C in order"
caps=$(grep '^caps: ' "$work/plan.txt") || fail "no caps line in the plan"
a=$(sed -n 's/.* A=\([0-9]*\).*/\1/p' <<< "$caps")
b=$(sed -n 's/.* B=\([0-9]*\).*/\1/p' <<< "$caps")
sum=$(sed -n 's/.* A+B=\([0-9]*\).*/\1/p' <<< "$caps")
[ -n "$a" ] && [ -n "$b" ] && [ "$sum" = $((a + b)) ] || fail "caps line '$caps'"
[ "$sum" -le 300 ] || fail "phases A and B take $sum s of caps, over 300"
# Every step line's cap adds up to its phase's sum.
for p in A B; do
  listed=$(awk -v p="$p" '$1 == p && $(NF) != "" && $4 == "s" { s += $3 } END { print s + 0 }' \
    <(sed -n "/^phase $p: /,/^phase $p: .* s of caps$/p" "$work/plan.txt"))
  want=$(sed -n "s/^phase $p: \([0-9]*\) s of caps$/\1/p" "$work/plan.txt")
  [ "$listed" = "$want" ] || fail "phase $p's steps add up to $listed s, its sum says $want"
done
for s in locate-nccl gpu-tests nccl-tests deps-streams-2 deps-streams-4 round-1/data-parallel \
  round-1/torch-train sanitizer-memcheck-new sanitizer-memcheck-dags ptx summary; do
  grep -qE "^  [ABC]  $s " "$work/plan.txt" || fail "the plan has no step $s"
done
# The random-DAG test is memcheck's last; NCCL's tests run under no tool.
last=$(grep -E '^  B  sanitizer-memcheck' "$work/plan.txt" | tail -n 1)
grep -q gpu_deps_random_dags <<< "$last" || fail "memcheck's last step is not the random-DAG test: $last"
! grep -E '^  B ' "$work/plan.txt" | grep -q nccl || fail "phase B runs an NCCL test under a tool"
bash "$kit" --dry-run --plan full --sanitizers > "$work/plan-full.txt" 2>&1 || fail "--plan full --dry-run"
bash "$kit" --plan nonsense --dry-run > /dev/null 2>&1 && fail "an unknown plan was accepted"
ok "the dry run: phases A, B, C in order, A+B = $sum s of caps (A $a, B $b), no GPU or nvidia-smi needed"

# --- a kill in the middle -----------------------------------------------------------------------
phase_a=$(awk '/^phase A: /,/^phase A: .* s of caps$/' "$work/plan.txt" | awk '$1 == "A" { print $2 }')
hang=sanitizer-racecheck-mlp
# Starts the kit with stand-in steps, $hang hanging, under `timeout -s TERM 60` (a bound only);
# returns once the hanging step has begun. Sets run (the folder) and pid (timeout's).
start_hanging() { # name
  run=$work/$1
  mkdir -p "$run/out"
  GPU_CHECK_STAND_IN=0.02 GPU_CHECK_STAND_IN_HANG=$hang \
    timeout -s TERM 60 bash "$kit" --out "$run/run" --export "$run/out" > "$run/stdout" 2>&1 &
  pid=$!
  pids+=("$pid")
  local _
  for _ in $(seq 1 200); do
    grep -q "^== $hang (cap" "$run/run/kit.log" 2> /dev/null && return 0
    kill -0 "$pid" 2> /dev/null || { cat "$run/stdout"; fail "$1: the kit ended before $hang began"; }
    sleep 0.1
  done
  fail "$1: $hang did not begin within 20 s"
}
# The archive's steps.tsv holds every step of phase A, each with its exit code.
check_archive() { # name, then steps it must also hold
  local name=$1
  shift
  local out=$run/out n
  [ -f "$out/gpu-check.tgz" ] || fail "$name: no archive in the export folder ($(ls "$out"))"
  [ ! -e "$out/gpu-check.tgz.part" ] || fail "$name: a .part was left behind"
  n=$(find "$out" -mindepth 1 | wc -l)
  [ "$n" -le 7 ] || fail "$name: $n files in the export folder, over 7: $(ls "$out")"
  mkdir -p "$run/unpacked"
  tar -xzf "$out/gpu-check.tgz" -C "$run/unpacked" || fail "$name: the archive does not unpack"
  local tsv=$run/unpacked/run/steps.tsv s
  [ -f "$tsv" ] || fail "$name: the archive holds no steps.tsv"
  for s in $phase_a "$@"; do
    awk -F '\t' -v s="$s" '$1 == s { found = 1 } END { exit !found }' "$tsv" ||
      fail "$name: the archive's steps.tsv has no row for $s"
  done
  awk -F '\t' '$4 == "A" && $3 != "0" { bad = 1 } END { exit bad }' "$tsv" ||
    fail "$name: a phase A stand-in step did not pass"
  [ -f "$run/unpacked/run/summary.md" ] || fail "$name: the archive holds no summary.md"
}

# SIGTERM, as a device's time limit sends it through timeout: the trap stops the hanging step,
# records it, and packs a last checkpoint.
start_hanging term
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
# timeout passes on the kit's own exit: 128 + 15 after its trap.
[ "$rc" = 143 ] || { cat "$run/stdout"; fail "term: the exit is $rc, not 143 (SIGTERM, trapped)"; }
check_archive term sanitizer-memcheck-fixed "$hang"
grep -qP "^$hang\t[0-9.]+\tkilled: SIGTERM\tB" "$run/unpacked/run/steps.tsv" ||
  fail "term: the killed step is not recorded as killed: $(cat "$run/unpacked/run/steps.tsv")"
cmp -s "$run/out/steps.tsv" "$run/unpacked/run/steps.tsv" || fail "term: the exported steps.tsv is not the archive's"
for f in kit.log summary.md; do [ -f "$run/out/$f" ] || fail "term: no $f exported"; done
grep -q "SIGTERM" "$run/out/kit.log" || fail "term: the exported kit.log does not say the run was stopped"
! pgrep -f "^sleep 100000$" > /dev/null || fail "term: the hanging step's process outlived the kit"
ok "SIGTERM mid-phase B: the archive holds phase A's $(wc -w <<< "$phase_a") rows and the killed step's"

# SIGKILL: no trap runs; the checkpoint after phase A must be there, whole.
start_hanging kill
kill -KILL "$(pgrep -P "$pid" -f "$kit" | head -n 1)" 2> /dev/null || kill -KILL "$pid"
wait "$pid" 2> /dev/null || true
check_archive kill
! awk -F '\t' '$4 == "B" { found = 1 } END { exit !found }' "$run/unpacked/run/steps.tsv" ||
  fail "kill: the checkpoint after phase A holds phase B's rows"
ok "SIGKILL mid-phase B: the checkpoint after phase A came back whole"

# --- the deadline -------------------------------------------------------------------------------
run=$work/deadline
start=$SECONDS
rc=0
GPU_CHECK_STAND_IN=0.02 GPU_CHECK_STAND_IN_HANG=state \
  timeout -s TERM 60 bash "$kit" --deadline 30 --out "$run/run" --export "$run/out" > "$work/deadline.out" 2>&1 || rc=$?
took=$((SECONDS - start))
tsv=$run/run/steps.tsv
[ "$rc" = 1 ] || { cat "$work/deadline.out"; fail "deadline: exit $rc, not 1 (a step was cut off)"; }
[ "$took" -le 30 ] || fail "deadline: the kit took $took s, past its 30 s deadline"
grep -qP '^state\t[0-9.]+\t124\tA\t6$' "$tsv" || fail "deadline: the hanging step was not cut at its cap: $(head -n 3 "$tsv")"
grep -qP '^round-1/data-parallel\t0\tskipped: deadline\t' "$tsv" || fail "deadline: a step that no longer fits was not skipped"
grep -qP '^locate-nccl\t[0-9.]+\t0\t' "$tsv" || fail "deadline: a step that fits did not run"
grep -q '| round-1/data-parallel | A | 40 | 0 | skipped: deadline |' "$run/run/summary.md" ||
  fail "deadline: the summary does not show the skipped step"
grep -q '| round-1/data-parallel | report | skipped: deadline |' "$run/run/summary.md" ||
  fail "deadline: the summary shows a skipped step's report as other than skipped"
[ ! -e "$work/nvidia-smi-called" ] || fail "a stand-in run called nvidia-smi"
ok "the deadline: a hanging step cut at its cap, $(grep -c 'skipped: deadline' "$tsv") steps skipped, done in $took s"

# --- a rehearsal with stand-in programs ----------------------------------------------------------
# The real path (no GPU_CHECK_STAND_IN): the kit's own functions run as steps, against a parbench,
# library tests, nvidia-smi and compute-sanitizer that only answer as the real ones would, and
# NCCL in a venv whose bin/ is on PATH, never activated. PyTorch's measures fail here (no GPU):
# they, and the summary that counts them, are the only steps allowed to.
kit_dir=$work/kit
mkdir -p "$kit_dir" "$work/fake" "$work/venv/bin" "$work/venv/lib/python3.12/site-packages/nvidia/nccl/lib"
touch "$work/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"
cp "$kit" "$kit_dir/gpu-check.sh"
cp scripts/gpu-vs-torch.py scripts/gpu-chapter-torch.py scripts/train-vs-torch.py "$kit_dir/"
cp src/device/cuda/kernels/elementwise.cu src/device/cuda/kernels/elementwise.ptx \
  src/device/cuda/kernels/mlp.cu src/device/cuda/kernels/mlp.ptx "$kit_dir/"
echo rehearsal > "$kit_dir/COMMIT"
cat > "$kit_dir/parbench" << 'PARBENCH'
#!/usr/bin/env bash
out='' args=("$@")
for ((i = 0; i < $#; i++)); do [ "${args[$i]}" = -o ] && out=${args[$((i + 1))]}; done
case "$*" in
  "devices --json") echo '{"gpu": {"available": true, "name": "Rehearsal GPU"}, "gpus": [{"ordinal": 0}]}'; exit ;;
  devices) echo "gpu: Rehearsal GPU"; exit ;;
  "devices --probe --json") echo '{"host": "h", "limits": {}}'; exit ;;
  --help) echo "PARBENCH_GPU_INJECT_FAULT"; exit ;;
  "help memory") echo "--gpu-memory-fraction"; exit ;;
  "help data-parallel") echo "cuda: train on the GPU; --device <VALUE>"; exit ;;
esac
[ "${CUDA_VISIBLE_DEVICES-unset}" = "" ] && { echo "error: no GPU (CUDA_VISIBLE_DEVICES is '')" >&2; exit 2; }
[ "${PARBENCH_GPU_INJECT_FAULT:-}" = 1 ] && { echo "error: device synchronization failed" >&2; exit 1; }
case "$*" in
  "--gpu 1 async --device cuda") echo "error: no GPU 1: this machine has 1" >&2; exit 2 ;;
  *--gpu-memory-fraction*) echo "error: GPU memory cap" >&2; exit 1 ;;
  *"--devices 2"*) echo "error: asks for 2 GPUs, and this machine has 1" >&2; exit 2 ;;
  *"--backend mpi"*) echo "error: --backend mpi is not offered on the GPU" >&2; exit 2 ;;
esac
echo '{"runs": [{"scenario": "'"$1"'", "derived": {}, "notes": [], "checks": [{"name": "rehearsed", "passed": true, "detail": "d"}]}]}' > "$out"
PARBENCH
# The library tests: every test the kit names passes (NCCL's when asked for alone).
names=$(sed -n '/^NEW_TESTS=(/,/^)/p; /^FIXED_TESTS=(/,/^)/p; s/^DAG_TEST=//p' "$kit" | grep -v '[()]' | tr -d ' ' | tr '\n' ' ')
cat > "$kit_dir/parbench-lib-tests" << TESTS
#!/usr/bin/env bash
if [[ "\$*" == *"--ignored gpu_nccl_"* ]]; then set -- gpu_nccl_allreduce_on_one_rank_equals_host_sgd; else set -- $names; fi
echo "running \$# tests"
for t in "\$@"; do echo "test x::\$t ... ok"; done
echo "test result: ok. \$# passed; 0 failed; 0 ignored; 0 measured"
TESTS
cat > "$work/fake/nvidia-smi" << 'SMI'
#!/usr/bin/env bash
case "$*" in
  -L) echo "GPU 0: Rehearsal GPU (UUID: x)" ;;
  *-lms*) echo "timestamp, clocks.current.sm [MHz]"; while sleep 0.25; do echo "t, 1980 MHz"; done ;;
  *) echo "rehearsal" ;;
esac
SMI
cat > "$work/fake/compute-sanitizer" << 'SANITIZER'
#!/usr/bin/env bash
while [[ "$1" == --* ]]; do shift 2; done
"$@" && echo "========= ERROR SUMMARY: 0 errors"
SANITIZER
chmod +x "$kit_dir/parbench" "$kit_dir/parbench-lib-tests" "$work/fake/"*
run=$work/rehearsal
rc=0
env -u VIRTUAL_ENV PATH="$work/venv/bin:$work/fake:${PATH#"$work/bin:"}" \
  timeout -s TERM 120 bash "$kit_dir/gpu-check.sh" --rounds 2 --out "$run/run" --export "$run/out" > "$work/rehearsal.out" 2>&1 || rc=$?
tsv=$run/run/steps.tsv
[ -f "$tsv" ] || { cat "$work/rehearsal.out"; fail "rehearsal: no steps.tsv"; }
bad=$(awk -F '\t' 'NR > 1 && $3 != "0" && $3 !~ /^skipped: no nvcc/ && $1 !~ /torch/ && $1 != "summary" { print $1 " (" $3 ")" }' "$tsv")
[ -z "$bad" ] || { cat "$work/rehearsal.out"; fail "rehearsal: steps failed: $bad"; }
[ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "rehearsal: exit $rc"
for s in $phase_a sanitizer-memcheck-fixed sanitizer-memcheck-new sanitizer-memcheck-dags \
  sanitizer-initcheck-new sanitizer-racecheck-mlp sanitizer-synccheck-mlp round-2/async round-2/data-parallel; do
  awk -F '\t' -v s="$s" '$1 == s { found = 1 } END { exit !found }' "$tsv" || fail "rehearsal: no row for $s"
done
grep -qx "found: $work/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2" "$run/run/nccl.txt" ||
  fail "rehearsal: NCCL in the venv on PATH was not found: $(head -n 1 "$run/run/nccl.txt")"
grep -q "gpu_nccl_allreduce_on_one_rank_equals_host_sgd ... ok" "$run/run/nccl.txt" || fail "rehearsal: nccl.txt lacks the NCCL tests' result"
[ "$(grep -c $'\tok\t' "$run/run/error-paths.tsv")" = 6 ] || fail "rehearsal: not 6 error paths ok: $(cat "$run/run/error-paths.tsv")"
[ "$(ls "$run/out" | tr '\n' ' ')" = "gpu-check.tgz gpu-tests.txt kit.log nccl.txt steps.tsv summary.md " ] ||
  fail "rehearsal: the export folder holds $(ls "$run/out" | tr '\n' ' ')"
grep -q '| compute-sanitizer | memcheck-dags | ok: tool: 0 errors' "$run/run/summary.md" || fail "rehearsal: no memcheck verdict in the summary"
grep -q '| deps-streams-4 | rehearsed | ok: d |' "$run/run/summary.md" || fail "rehearsal: no deps-streams check in the summary"
ok "a rehearsal with stand-in programs: every step but PyTorch's passed, NCCL found in a venv on PATH"

echo "gpu-check-test: $passed passed, 0 failed"
