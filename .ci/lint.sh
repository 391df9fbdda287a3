#!/usr/bin/env bash
# Every linter and tree rule that CI runs (CONTRIBUTING.md "Linters"), all of
# them even when one fails; exits 1 if any failed. Seconds; needs no build.
set -euo pipefail
cd "$(dirname "$0")/.."
failed=()
check() {
  echo "== $*"
  "$@" || failed+=("$*")
}
check bash .ci/format-check.sh
check bash .ci/lint-shell.sh
check bash .ci/lint-python.sh
check python3 .ci/check-links.py
check python3 .ci/check-includes.py
check bash .ci/check-env.sh
check bash .ci/check-vocabulary.sh
if [ "${#failed[@]}" -gt 0 ]; then
  printf 'lint: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "lint: all checks passed"
