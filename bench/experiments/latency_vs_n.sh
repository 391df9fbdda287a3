#!/usr/bin/env bash
# Where a small allreduce's time goes, against N, on one machine's loopback
# (docs/lab-notes/per-message-latency.md): in alternated rounds, for each N,
#   probe          bare gRPC streams doing recursive doubling, no gradsync
#                  code (bench/grpc_latency_probe; N a power of two only);
#   tree-plain, ring-plain
#                  gradsync's GrpcTransport in plain processes
#                  (bench/allreduce_compare --impl=gradsync);
#   tree-daemons, ring-daemons
#                  the worker daemons (gradsync local bench).
# Each is timed as `gradsync bench` times it (after a 1-float barrier; the
# median over iterations of the slowest rank). Prints one line per run and a
# table of the medians over the rounds, in microseconds, with each one's time
# per exchange (tree: log2 N rounds; ring: 2(N-1) steps).
#
#   bash bench/experiments/latency_vs_n.sh [--workers=2,4,8] [--bytes=4096] [--iters=2000]
#                              [--rounds=2] [--build-dir=build]
#
# --build-dir: where bin/gradsync and bench/ are (a CMake build directory;
# the lent machine's bundle keeps them under .devbundle/bin, which works as
# --build-dir=.devbundle too). A run that fails or times out (120 s) prints
# FAILED with its status and counts as missing. Exits 1 if any run failed.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORKERS=2,4,8 BYTES=4096 ITERS=2000 ROUNDS=2 BUILD=build
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "latency_vs_n: $*" >&2; exit 2; }
for arg in "$@"; do
  case $arg in
    --workers=*) WORKERS=${arg#*=} ;;
    --bytes=*) BYTES=${arg#*=} ;;
    --iters=*) ITERS=${arg#*=} ;;
    --rounds=*) ROUNDS=${arg#*=} ;;
    --build-dir=*) BUILD=${arg#*=} ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown flag '$arg' (--help lists them)" ;;
  esac
done
[[ $WORKERS =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--workers takes N,N,... (2..16)"
IFS=, read -ra NS <<<"$WORKERS"
for n in "${NS[@]}"; do ((n >= 2 && n <= 16)) || die "--workers: each N must be 2..16, got $n"; done
# The pattern first: only a plain number reaches the arithmetic test.
[[ $BYTES =~ ^[1-9][0-9]*$ ]] || die "--bytes must be a positive multiple of 4"
((BYTES % 4 == 0)) || die "--bytes must be a positive multiple of 4"
[[ $ITERS =~ ^[1-9][0-9]*$ ]] || die "--iters must be 1..10000"
((ITERS <= 10000)) || die "--iters must be 1..10000"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds must be 1..20"
((ROUNDS <= 20)) || die "--rounds must be 1..20"
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
find_bin() {  # find_bin NAME: in BUILD/bin or BUILD/bench
  local d
  for d in "$BUILD/bin" "$BUILD/bench"; do [[ -x $d/$1 ]] && { echo "$d/$1"; return; }; done
  die "no $1 under $BUILD/bin or $BUILD/bench (build first, or pass --build-dir)"
}
# The lent machine's bundle ships bin/ and lib/ packed (deploy/devbundle.sh).
if [[ ! -d $BUILD/bin && -f $BUILD/bin-lib.tar.xz ]]; then
  tar -C "$BUILD" -xJf "$BUILD/bin-lib.tar.xz" || die "cannot unpack $BUILD/bin-lib.tar.xz"
fi
GRADSYNC=$(find_bin gradsync) || exit 2
PROBE=$(find_bin grpc_latency_probe) || exit 2
COMPARE=$(find_bin allreduce_compare) || exit 2
[[ -d $BUILD/lib ]] && export LD_LIBRARY_PATH=$BUILD/lib:${LD_LIBRARY_PATH:-}

declare -A TIMES   # "N kind" -> space-separated microseconds
FAILED=0
record() {  # record N KIND MICROSECONDS-or-empty STATUS
  if [[ -n $3 ]]; then
    TIMES["$1 $2"]+="$3 "
    printf 'round %d N=%-2d %-13s %10.1f us\n' "$round" "$1" "$2" "$3"
  else
    FAILED=1
    printf 'round %d N=%-2d %-13s FAILED (status %s)\n' "$round" "$1" "$2" "$4"
  fi
}
pow2() { (( ($1 & ($1 - 1)) == 0 )); }
run_probe() {
  local out rc
  out=$(timeout -k 5 120 "$PROBE" --ranks="$1" --bytes="$BYTES" --iters="$ITERS" \
    --warmup=200 --mode=push 2>&1); rc=$?
  record "$1" probe "$(sed -n 's/.*slowest rank median \([0-9.]*\) us.*/\1/p' <<<"$out" | tail -1)" "$rc"
}
run_plain() {  # run_plain N ALGORITHM
  local out rc
  out=$(timeout -k 5 120 "$COMPARE" --impl=gradsync --algorithm="$2" --ranks="$1" \
    --sizes="$BYTES" --iters="$ITERS" --warmup=100 --rounds=1 2>&1); rc=$?
  # the row: round impl bytes time_ms busbw
  record "$1" "$2-plain" "$(awk '$2 == "gradsync" && $3 ~ /^[0-9]+$/ {printf "%.1f", $4 * 1000}' <<<"$out" | tail -1)" "$rc"
}
run_daemons() {  # run_daemons N ALGORITHM
  local out rc
  out=$(timeout -k 5 120 "$GRADSYNC" local bench --workers="$1" --algorithm="$2" \
    --sizes="$BYTES" --iters="$ITERS" --warmup=100 2>&1); rc=$?
  record "$1" "$2-daemons" "$(awk -v b="$BYTES" '$1 == b && $NF == "OK" {print $3}' <<<"$out" | tail -1)" "$rc"
}
for ((round = 1; round <= ROUNDS; round++)); do
  for n in "${NS[@]}"; do
    if pow2 "$n"; then run_probe "$n"; fi
    run_plain "$n" tree; run_daemons "$n" tree
    run_plain "$n" ring; run_daemons "$n" ring
  done
done

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'; }
echo
echo "medians over $ROUNDS round(s), $BYTES bytes, microseconds (per exchange in brackets)"
printf '%3s' N
for k in probe tree-plain tree-daemons ring-plain ring-daemons; do printf ' %22s' "$k"; done
echo
for n in "${NS[@]}"; do
  printf '%3d' "$n"
  # recursive doubling: log2 p rounds, p the largest power of two <= N, and
  # a fold in and out when N is not one
  rounds=$(awk -v n="$n" 'BEGIN {r = 0; while ((2 ^ (r + 1)) <= n) r++; print r + (2 ^ r < n ? 2 : 0)}')
  for k in probe tree-plain tree-daemons ring-plain ring-daemons; do
    m=$(median <<<"${TIMES["$n $k"]:-}")
    if [[ -z $m ]]; then printf ' %22s' -; continue; fi
    case $k in ring*) per=$((2 * (n - 1))) ;; *) per=$rounds ;; esac
    printf ' %22s' "$(awk -v m="$m" -v p="$per" 'BEGIN {printf "%.1f (%.1f)", m, m / p}')"
  done
  echo
done
exit $FAILED
