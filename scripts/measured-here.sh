#!/usr/bin/env bash
# Regenerates the table of results/measured-here.md: runs every command the table names, on
# this machine, now, and prints the table in Markdown with the date, the machine and its FMA
# peak before and after (paste it over the old one, with the host, date and commit). About 12
# minutes on a 2-core machine. Not CI.
#
#   scripts/measured-here.sh            (outputs under target/measured-here/)
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/measured-here
mkdir -p "$out"
cargo build --release --quiet
bin=target/release/parbench

probe() { # the machine's FMA peak now, or why not
  local p=../shared/tools/machine-probe
  if [ -x "$p" ]; then "$p" | tr '\n' ' '; else echo "(no machine-probe at $p)"; fi
}
seconds() { # command... -> wall seconds on stdout; the command's own output goes to $out/last.txt
  local t0 t1
  t0=$(date +%s.%N)
  "$@" > "$out/last.txt"
  t1=$(date +%s.%N)
  python3 -c "print(f'{$t1 - $t0:.1f}')"
}

echo "probe before: $(probe)" > "$out/probes.txt"
seconds "$bin" all --quiet -o "$out/all.json" > "$out/all-seconds.txt"
seconds "$bin" run scenarios/ci.toml --quiet -o "$out/ci1.json" > "$out/ci-seconds.txt"
"$bin" run scenarios/ci.toml --quiet -o "$out/ci2.json" > /dev/null
"$bin" compare "$out/ci1.json" "$out/ci2.json" --format json > "$out/ci-compare.json" || true
# Three sizes, 1 and 2 threads each; measured-here.py reads every numpy-SIZE.txt.
rm -f "$out"/numpy-*.txt
for run in "1000 5" "2000 5" "4000 3"; do
  set -- $run
  scripts/matmul-vs-blas.sh "$1" "$2" > "$out/numpy-$1.txt"
done
# The engine's own cost (criterion writes each estimate to target/criterion/*/new/estimates.json).
rm -rf target/criterion/async target/criterion/round_trip target/criterion/floor
cargo bench --quiet --bench engine -- --noplot > "$out/bench.txt" 2>&1
cp -r target/criterion "$out/"
# The randomized engine test at a million ops (a debug build, as CI runs it at 12,000).
PARBENCH_TORTURE=1000000 seconds cargo test --quiet --lib engine::torture -- --nocapture \
  > "$out/torture-seconds.txt" 2> "$out/torture.txt"
echo "probe after: $(probe)" >> "$out/probes.txt"

python3 scripts/measured-here.py "$out"
