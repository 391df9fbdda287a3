#!/usr/bin/env bash
# Runs shellcheck over every shell script of the checkout: the files git knows
# (tracked, plus untracked ones that are not ignored, so a new script is
# checked before it is committed) that are named *.sh or start with a sh,
# bash, dash or ksh shebang (#!/bin/sh, #!/usr/bin/env bash, ...).
# Exits 0 when shellcheck finds nothing, 1 on findings, 2 without shellcheck.
#   bash .ci/lint-shell.sh           check them all
#   bash .ci/lint-shell.sh --list    only print the files it would check
# Environment: SHELLCHECK (default: shellcheck on PATH).
# A finding that is intended is silenced where it is, with its reason on the
# same line:  # shellcheck disable=SC2086  # PKGS is a word list
set -euo pipefail
cd "$(dirname "$0")/.."

list_only=0
case "${1:-}" in
  "") ;;
  --list) list_only=1 ;;
  -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "lint-shell: unknown argument '$1' (--help)" >&2; exit 2 ;;
esac

is_shell_script() {  # is_shell_script FILE: named *.sh, or a shell shebang
  [[ $1 == *.sh ]] && return 0
  # Only the first line, and at most 256 bytes of it (binaries have no newline).
  head -c 256 -- "$1" | head -n 1 |
    grep -qaE '^#![[:space:]]*[^[:space:]]*/(env[[:space:]]+)?(ba|da|k)?sh([[:space:]]|$)'
}

files=()
while IFS= read -r -d '' f; do
  [[ -f $f && ! -L $f ]] || continue   # deleted from the work tree, or a link
  if is_shell_script "$f"; then files+=("$f"); fi
done < <(git ls-files -z --cached --others --exclude-standard | sort -zu)

if ((list_only)); then
  printf '%s\n' "${files[@]}"
  exit 0
fi
if ((${#files[@]} == 0)); then
  echo "lint-shell: no shell scripts found" >&2
  exit 1
fi

SHELLCHECK=${SHELLCHECK:-shellcheck}
if ! command -v "$SHELLCHECK" >/dev/null; then
  echo "lint-shell: $SHELLCHECK not found (apt-get install shellcheck)" >&2
  exit 2
fi

if "$SHELLCHECK" -- "${files[@]}"; then
  echo "lint-shell: ${#files[@]} scripts, no findings"
else
  echo "lint-shell: shellcheck found problems in the scripts above" >&2
  exit 1
fi
