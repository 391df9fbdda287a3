#!/usr/bin/env bash
# flake8 over every tracked Python file (git ls-files '*.py'), with the
# repository's .flake8 (line length 100, flake8's default checks).
#
# Exits non-zero on any finding, printing flake8's lines (path:line:col: code
# message). Where flake8 is not installed it prints
#   SKIPPED: lint-python: flake8 not installed
# and passes; CI installs it (Debian: python3-flake8), so there it runs.
#
# Run by hand from anywhere in the checkout:
#   bash .ci/lint-python.sh
# Environment:
#   PYTHON3  the interpreter whose flake8 runs (default /usr/bin/python3,
#            Debian's, where apt installs python3-flake8)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON3:-/usr/bin/python3}
if ! "$python" -m flake8 --version >/dev/null 2>&1; then
  echo "SKIPPED: lint-python: flake8 not installed"
  exit 0
fi
listed=$(git ls-files --cached --others --exclude-standard '*.py')   # outside a checkout: fails here (set -e)
mapfile -t files <<<"$listed"
if [ -z "$listed" ]; then files=(); fi
if [ "${#files[@]}" -eq 0 ]; then
  echo "lint-python: no Python files"
  exit 0
fi
status=0
"$python" -m flake8 -- "${files[@]}" || status=$?
if [ "$status" -eq 0 ]; then
  echo "lint-python: ${#files[@]} files clean"
else
  echo "lint-python: flake8 found problems (status $status)" >&2
fi
exit "$status"
