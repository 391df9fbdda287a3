#!/usr/bin/env bash
# Fails when the worker, the servers or the code they share read the clock or
# sleep without their Env (common/env.h): every absl::Now(), absl::SleepFor,
# std::this_thread::sleep_for, sleep( / usleep( and std::chrono *_clock::now()
# in worker/, server/ and common/ (*.cc, *.h, *.cu) is printed as FILE:LINE: TEXT and
# the script exits 1; 0 when there is none. Text after // on a line is a
# comment and is not checked. The Env's own files (common/env.*,
# common/testing/fake_env.*) are the only places that may call them.
#   bash .ci/check-env.sh
set -euo pipefail
cd "$(dirname "$0")/.."

readonly pattern='absl::Now[(][)]|absl::SleepFor|sleep_for|(^|[^A-Za-z0-9_])u?sleep[(]|_clock::now[(][)]'

files=()
while IFS= read -r -d '' f; do
  case "$f" in
    common/env.*|common/testing/fake_env.*) continue ;;
  esac
  files+=("$f")
done < <(find worker server common -type f \( -name '*.cc' -o -name '*.h' -o -name '*.cu' \) -print0 | sort -z)

if [ "${#files[@]}" -eq 0 ]; then
  echo "check-env: no sources found under worker/, server/ and common/" >&2
  exit 2
fi

found=0
# awk prints FILE:LINE: TEXT for every line whose code (before //) matches.
hits=$(awk -v re="$pattern" '
  { code = $0; sub(/\/\/.*/, "", code) }
  code ~ re { printf "%s:%d: %s\n", FILENAME, FNR, $0 }
' "${files[@]}") || true
if [ -n "$hits" ]; then
  found=1
  printf '%s\n' "$hits"
  echo "check-env: the clock or a sleep used directly in worker/, server/ or common/;" \
       "go through the Env (common/env.h)" >&2
fi
exit "$found"
