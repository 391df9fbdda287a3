#!/usr/bin/env bash
# Checks that every C++ and CUDA source of the checkout is formatted as
# .clang-format says (Debian's clang-format 14). Exits 1 listing the files
# that are not, 2 without clang-format.
#   bash .ci/format-check.sh         check
#   bash .ci/format-check.sh --fix   reformat them in place
# Environment: CLANG_FORMAT (default: clang-format on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT="${CLANG_FORMAT:-clang-format}"
if ! command -v "$CLANG_FORMAT" >/dev/null; then
  echo "format-check: $CLANG_FORMAT not found (deploy/install-deps.sh installs it)" >&2
  exit 2
fi
files=()
while IFS= read -r f; do
  [ -f "$f" ] && files+=("$f")
done < <(git ls-files --cached --others --exclude-standard -- '*.cc' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = "--fix" ]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  echo "format-check: reformatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! "$CLANG_FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [ "${#bad[@]}" -gt 0 ]; then
  printf '%s\n' "${bad[@]}"
  echo "format-check: ${#bad[@]} of ${#files[@]} files differ from .clang-format" \
    "(bash .ci/format-check.sh --fix)" >&2
  exit 1
fi
echo "format-check: OK (${#files[@]} files)"
