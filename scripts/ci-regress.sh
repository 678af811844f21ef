#!/usr/bin/env bash
# Regression gate: this checkout against a base revision, measured side by side with
# `parbench ab` over scenarios/ci.toml (paired, ABBA order: drift of a shared runner hits both
# sides of each pair), with a Markdown summary for a pull request.
#
#   scripts/ci-regress.sh [BASE_REV]     default: the merge base of HEAD and origin/main (or main)
#
# Exit 0: no time slower; 1: a regression; 2: bad input or a build that fails (then no
# summary is written: a stale one is removed first, so nothing reads an earlier verdict).
# Outputs in target/ci-regress/: summary.md (the table), ab.json (every pair). The candidate is
# built into `ab`'s shared target folder (target/ab/target), where `ab` builds the base (its
# executable kept in target/ab/<commit>/), so the two builds share their dependencies.
# THRESHOLD (default 5%) and BUDGET (seconds, default 240) are passed to `ab`.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/ci-regress
mkdir -p "$out"
rm -f "$out/summary.md" "$out/table.md" "$out/ab.json"
fail() { echo "ci-regress.sh: $*" >&2; exit 2; }
base_rev=${1:-$(git merge-base HEAD origin/main 2>/dev/null || git merge-base HEAD main)} ||
  fail "no base revision given and no merge base of HEAD with origin/main or main"
base_sha=$(git rev-parse --verify --quiet "$base_rev^{commit}") ||
  fail "$base_rev is not a git revision of this repository"
cargo build --release --quiet --target-dir target/ab/target ||
  fail "cargo build of this checkout failed"
cp target/ab/target/release/parbench "$out/parbench-candidate"

status=0
"$out/parbench-candidate" ab "$base_sha" "$out/parbench-candidate" scenarios/ci.toml \
  --threshold "${THRESHOLD:-5%}" --budget "${BUDGET:-240}" --format markdown -o "$out/ab.json" \
  > "$out/table.md" || status=$?
if [ "$status" -gt 1 ]; then
  echo "ci-regress.sh: parbench ab exited $status: no verdict, no summary" >&2
  exit "$status"
fi
{
  echo "### parbench A/B: ${base_sha:0:10} (base) vs $(git rev-parse --short=10 HEAD) (candidate)"
  echo
  cat "$out/table.md"
} > "$out/summary.md.partial"
mv "$out/summary.md.partial" "$out/summary.md"
cat "$out/summary.md"
exit "$status"
