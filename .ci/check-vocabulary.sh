#!/usr/bin/env bash
# Fails when a retired name is used (docs/architecture.md "Glossary"): the
# strategy is "allreduce" (not "ring", which is one of its algorithms), so
# STRATEGY_RING, --strategy=ring, strategy="ring" and the labels
# ring-sync / ring-async are retired; recursive doubling is "rd" (the name
# "tree" is kept for a real tree algorithm), so ALGORITHM_TREE and
# --algorithm=tree are; a collective's phase is a CollectivePhase, not a
# RingPhase; the PS client's unit is a partition (PsPartition), not a piece. Every hit is printed as FILE:LINE: TEXT and the script exits 1;
# 0 when there is none. A line that names an old spelling on purpose (to
# read it, or to say it is old) says "old name", "old spelling" or
# "deprecated" on the same line. History is not rewritten: docs/lab-notes/,
# docs/experiment/ and docs/performance.md keep the names of their day.
#   bash .ci/check-vocabulary.sh
set -euo pipefail
cd "$(dirname "$0")/.."

readonly pattern='STRATEGY_RING|ALGORITHM_TREE|RingPhase|PsPiece|ps_piece_calls|ps_pieces[.]|(^|[^A-Za-z0-9_-])ring-(a)?sync([^A-Za-z0-9_]|$)|--strategy[= ]ring([^A-Za-z0-9_]|$)|--algorithm[= ]tree([^A-Za-z0-9_]|$)|strategy="ring"'
readonly allowed='old name|old spelling|deprecated'

files=()
while IFS= read -r f; do
  case "$f" in
    docs/lab-notes/*|docs/experiment/*|docs/performance.md|third_party/*) continue ;;
    .ci/check-vocabulary.sh) continue ;;
  esac
  files+=("$f")
done < <(git ls-files -- '*.cc' '*.h' '*.cu' '*.proto' '*.py' '*.sh' '*.md' '*.yml' 'CMakeLists.txt' '*.cmake' \
  '*.yaml' '*.sbatch' '*.js' '*.html')

if [ "${#files[@]}" -eq 0 ]; then
  echo "check-vocabulary: no tracked sources found" >&2
  exit 2
fi

hits=$(awk -v re="$pattern" -v ok="$allowed" '
  $0 ~ re && $0 !~ ok { printf "%s:%d: %s\n", FILENAME, FNR, $0 }
' "${files[@]}") || true
if [ -n "$hits" ]; then
  printf '%s\n' "$hits"
  echo "check-vocabulary: retired names above; see docs/architecture.md \"Glossary\"" >&2
  exit 1
fi
echo "check-vocabulary: OK (${#files[@]} files)"
