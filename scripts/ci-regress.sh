#!/usr/bin/env bash
# Regression gate: this checkout against a base revision, measured side by side with
# `parbench ab` over scenarios/ci.toml (paired, ABBA order: drift of a shared runner hits both
# sides of each pair), with a Markdown summary for a pull request.
#
#   scripts/ci-regress.sh [BASE_REV]     default: the merge base of HEAD and origin/main (or main)
#
# Exit 0: no time slower; 1: a regression; 2: bad input or a build that fails.
# Outputs in target/ci-regress/: summary.md (the table), ab.json (every pair). `ab` builds the
# base once (into the shared target/ab/target, its executable kept in target/ab/<commit>/). THRESHOLD (default 5%) and BUDGET (seconds, default 240)
# are passed to it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/ci-regress
mkdir -p "$out"
base_rev=${1:-$(git merge-base HEAD origin/main 2>/dev/null || git merge-base HEAD main)}
base_sha=$(git rev-parse --verify "$base_rev^{commit}")
cargo build --release --quiet
cp target/release/parbench "$out/parbench-candidate"

status=0
"$out/parbench-candidate" ab "$base_sha" "$out/parbench-candidate" scenarios/ci.toml \
  --threshold "${THRESHOLD:-5%}" --budget "${BUDGET:-240}" --format markdown -o "$out/ab.json" \
  > "$out/table.md" || status=$?
{
  echo "### parbench A/B: ${base_sha:0:10} (base) vs $(git rev-parse --short=10 HEAD) (candidate)"
  echo
  cat "$out/table.md"
} > "$out/summary.md"
cat "$out/summary.md"
exit "$status"
