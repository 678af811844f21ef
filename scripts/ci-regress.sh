#!/usr/bin/env bash
# Regression gate: build a base revision and this checkout, measure them side by side with
# `parbench ab` over scenarios/ci.toml (paired, ABBA order: drift of a shared runner hits both
# sides of each pair), and write a Markdown summary for a pull request.
#
#   scripts/ci-regress.sh [BASE_REV]     default: the merge base of HEAD and origin/main (or main)
#
# Exit 0: no entry slower; 1: a regression; 2: bad input or a build that fails.
# Outputs in target/ci-regress/: summary.md (the table), ab.json (every pair).
# THRESHOLD (default 5%) and BUDGET (seconds, default 240) are passed to `ab`.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/ci-regress
mkdir -p "$out"
base_rev=${1:-$(git merge-base HEAD origin/main 2>/dev/null || git merge-base HEAD main)}
base_sha=$(git rev-parse --verify "$base_rev^{commit}")

# The base in a worktree of its own, built into its own target folder.
base_src="$out/base-src"
git worktree remove --force "$base_src" 2>/dev/null || rm -rf "$base_src"
git worktree add --quiet --detach "$base_src" "$base_sha"
trap 'git worktree remove --force "$base_src" 2>/dev/null || true' EXIT
cargo build --release --quiet --manifest-path "$base_src/Cargo.toml" --target-dir "$out/base-target"
cargo build --release --quiet
cp "$out/base-target/release/parbench" "$out/parbench-base"
cp target/release/parbench "$out/parbench-candidate"

status=0
"$out/parbench-candidate" ab "$out/parbench-base" "$out/parbench-candidate" scenarios/ci.toml \
  --threshold "${THRESHOLD:-5%}" --budget "${BUDGET:-240}" --format markdown -o "$out/ab.json" \
  > "$out/table.md" || status=$?
{
  echo "### parbench A/B: ${base_sha:0:10} (base) vs $(git rev-parse --short=10 HEAD) (candidate)"
  echo
  cat "$out/table.md"
} > "$out/summary.md"
cat "$out/summary.md"
exit "$status"
