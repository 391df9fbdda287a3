#!/usr/bin/env bash
# bench/experiments/latency_vs_n.sh end to end on a tiny setting: every kind of run
# gives a time, the table has them (no probe at N = 3, which is not a power
# of two), and bad flags or a missing build exit 2 naming what is wrong.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${GRADSYNC_BUILD_DIR:-$ROOT/build}
S=$ROOT/bench/experiments/latency_vs_n.sh
fail() { echo "FAIL: $*"; exit 1; }
out=$(bash "$S" --build-dir="$BUILD" --workers=2,3 --iters=50 --rounds=1 2>&1); rc=$?
echo "$out"
[[ $rc == 0 ]] || fail "exit $rc"
for k in probe tree-plain tree-daemons ring-plain ring-daemons; do
  grep -Eq "^round 1 N=2 +$k +[0-9.]+ us$" <<<"$out" || fail "no N=2 $k time"
done
grep -Eq "^round 1 N=3 +probe" <<<"$out" && fail "a probe at N=3"
grep -Eq '^  2 +[0-9.]+ \([0-9.]+\)( +[0-9.]+ \([0-9.]+\)){4}$' <<<"$out" || fail "no full N=2 row"
grep -Eq '^  3 +- +[0-9.]+ \([0-9.]+\)( +[0-9.]+ \([0-9.]+\)){3}$' <<<"$out" || fail "no N=3 row"
for bad in --workers=1 --bytes=6 --iters=0 --rounds=x --frob --build-dir=/nonexistent; do
  err=$(bash "$S" "$bad" 2>&1 >/dev/null); rc=$?
  [[ $rc == 2 ]] || fail "$bad: exit $rc"
  grep -q "latency_vs_n:" <<<"$err" || fail "$bad: no message"
done
echo PASSED
