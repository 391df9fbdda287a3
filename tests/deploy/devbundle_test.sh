#!/usr/bin/env bash
# deploy/devbundle.sh without building a bundle (seconds, no build needed):
# the scripts it puts in .devbundle/ are files in deploy/devbundle/ that
# parse (bash -n / sh -n, and Python's parser for gpu_summary.py), devbundle.sh
# writes no script from a heredoc, and every repository file it copies exists,
# among them the two the documented device commands run
# (bash .devbundle/run-gpu-checks.sh tests|perf, bash .devbundle/run-sweep.sh).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
S=$ROOT/deploy/devbundle.sh
DIR=$ROOT/deploy/devbundle
failed=0
fail() { echo "FAIL: $*"; failed=1; }

[[ -f $S ]] || { echo "FAIL: no $S"; exit 1; }
bash -n "$S" || fail "devbundle.sh does not parse"

# 1. No heredoc at all outside comments (here-strings, <<<, are fine): the
#    scripts used to be written with cat > .devbundle/X <<'RUN'.
heredocs=$(grep -nE '(^|[^<])<<-?[[:space:]]*["'\'']?[A-Za-z_]' "$S" | grep -vE '^[0-9]+:[[:space:]]*#')
[[ -z $heredocs ]] || fail "devbundle.sh writes from a heredoc:"$'\n'"$heredocs"

# 2. The repository files it copies: BUNDLE_SCRIPTS=(...) from deploy/devbundle/,
#    and every literal bench/... or deploy/... source of a cp line (a source
#    with a variable in it, "deploy/devbundle/$f", is BUNDLE_SCRIPTS' loop).
read -ra scripts <<<"$(sed -n 's/^BUNDLE_SCRIPTS=(\(.*\))$/\1/p' "$S")"
((${#scripts[@]} > 0)) || fail "no BUNDLE_SCRIPTS=(...) line in devbundle.sh"
copied=()
for f in "${scripts[@]}"; do copied+=("deploy/devbundle/$f"); done
while IFS= read -r f; do copied+=("$f"); done < <(
  grep -vE '^[[:space:]]*#' "$S" |
    grep -oE '(^|[[:space:];])cp([[:space:]]+-[A-Za-z]+)*[[:space:]]+"?(bench|deploy)/[A-Za-z0-9_./-]+("|[[:space:]]|$)' |
    grep -oE '(bench|deploy)/[A-Za-z0-9_./-]+' | sort -u)
for want in deploy/devbundle/run-gpu-checks.sh deploy/devbundle/run-sweep.sh \
            deploy/devbundle/run-train-sweep.sh deploy/devbundle/gpu_summary.py \
            deploy/devbundle/net-wrapper.sh; do
  [[ " ${copied[*]} " == *" $want "* ]] || fail "devbundle.sh does not copy $want"
done
for f in "${copied[@]}"; do
  [[ -f $ROOT/$f ]] || { fail "devbundle.sh copies $f, which does not exist"; continue; }
  echo "copied: $f"
done
# Nothing in deploy/devbundle/ that the bundle leaves out.
for f in "$DIR"/*; do
  rel=deploy/devbundle/${f##*/}
  [[ " ${copied[*]} " == *" $rel "* ]] || fail "$rel is not copied by devbundle.sh"
done

# 3. Each bundle script parses with the shell its shebang names.
for f in "$DIR"/*; do
  first=$(head -n 1 "$f")
  case "$first" in
    *python3*)
      if command -v python3 >/dev/null; then
        python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f" \
          || fail "${f#"$ROOT"/} does not parse (python3)"
      fi ;;
    *bash*) bash -n "$f" || fail "${f#"$ROOT"/} does not parse (bash -n)" ;;
    '#!/bin/sh'*) sh -n "$f" || fail "${f#"$ROOT"/} does not parse (sh -n)" ;;
    *) fail "${f#"$ROOT"/}: unexpected first line '$first'" ;;
  esac
done

if ((failed)); then echo FAILED; exit 1; fi
echo PASSED
