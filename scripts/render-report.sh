#!/usr/bin/env bash
# Render an HTML report in a real browser (headless Chromium) and screenshot it, to check it as
# a person would: no clipped or overlapping text, figures legible.
#
#   scripts/render-report.sh [REPORT.html] [OUTDIR]
#
# Without REPORT.html it builds parbench (release) and runs `parbench all --html`, which takes a
# few minutes. Writes OUTDIR/tile-000.png, tile-001.png, ...: the page from top to bottom,
# WIDTH x HEIGHT pixels each (default 1400 x 1600).
# Default OUTDIR: target/render-report. Installs Debian's chromium when it is missing.
set -euo pipefail
html=${1:+$(realpath "$1")}
out=${2:+$(realpath -m "$2")}
cd "$(dirname "$0")/.."
out=${out:-target/render-report}
mkdir -p "$out"
if [ -z "$html" ]; then
  cargo build --release --quiet
  html=$out/report.html
  target/release/parbench all --quiet --html "$html" -o "$out/report.json" > "$out/table.txt"
fi
[ -f "$html" ] || { echo "error: no such file: $html" >&2; exit 2; }
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  apt-get update -qq && apt-get install -y -qq chromium > /dev/null
  browser=$(command -v chromium)
fi
# Headless Chromium paints only the top of a page it scrolled to an anchor, so each screenshot
# is of a wrapper page that holds the report in a frame shifted up by one tile's height.
dir=$(dirname "$(realpath "$html")")
name=$(basename "$html")
width=${WIDTH:-1400}
height=${HEIGHT:-1600}
rm -f "$out"/tile-*.png
for i in $(seq 0 199); do
  tile=$(printf '%s/.tile-%03d.html' "$dir" "$i")
  printf '<!DOCTYPE html><html><body style="margin:0;overflow:hidden"><iframe src="%s" style="position:absolute;left:0;top:-%dpx;width:%dpx;height:%dpx;border:0"></iframe></body></html>\n' \
    "$name" $((i * height)) "$width" $(((i + 1) * height)) > "$tile"
  profile=$(mktemp -d)
  png=$(printf '%s/tile-%03d.png' "$out" "$i")
  "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --hide-scrollbars --allow-file-access-from-files --user-data-dir="$profile" \
    --window-size="$width,$height" --screenshot="$png" "file://$tile" > /dev/null 2>&1
  rm -rf "$profile" "$tile"
  # A tile past the end of the page is one flat colour: a few kilobytes of PNG.
  if [ "$(stat -c %s "$png")" -lt 12000 ]; then
    rm -f "$png"
    break
  fi
  echo "$png"
done
