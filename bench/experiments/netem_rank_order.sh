#!/usr/bin/env bash
# bench/experiments/netem_rank_order.sh: what the coordinator's host-by-host ranks are
# worth to a ring over hosts with two workers each (root; docs/operations.md "Scheduling").
#
#   sudo bash bench/experiments/netem_rank_order.sh [--sizes=4M,16M] [--build-dir=build]
#
# Brings up 1 + 2 emulated hosts at 1 Gbit (bench/experiments/netem-cluster.sh, an
# 8 MiB tbf queue) with two workers on each, runs a ring bench job, then lets
# the second worker of each host leave and join again, so that the workers
# joined in the order h1-0, h2-0, h1-1, h2-1, and runs the job again. It
# prints each job's rows and the ranks it ran on (worker ids by rank). A
# coordinator that ranks by registration order alone runs the second job on
# alternating hosts (every hop of the ring crosses a link, two chunks per
# link per step: about twice the time); one that ranks host by host runs
# both on h1-0,h1-1,h2-0,h2-1 in the same time. Tears the hosts down on exit.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SIZES=4M,16M
BUILD_DIR=$ROOT/build
for arg in "$@"; do
  case $arg in
    --sizes=*) SIZES=${arg#*=} ;;
    --build-dir=*) BUILD_DIR=$(cd "${arg#*=}" && pwd) ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "netem_rank_order: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
((EUID == 0)) || { echo "netem_rank_order: needs root (network namespaces)" >&2; exit 2; }
B=$BUILD_DIR/bin
[[ -x $B/gradsync-worker ]] || { echo "netem_rank_order: no $B/gradsync-worker (build first)" >&2; exit 2; }
CLUSTER=$ROOT/bench/experiments/netem-cluster.sh
PREFIX=gsro$$
STATE=$(mktemp -d /tmp/netem-rank-order.XXXXXX)
FLAGS=(--prefix="$PREFIX" --state-dir="$STATE")
SERVER=10.77.0.10:50051
trap 'bash "$CLUSTER" down "${FLAGS[@]}" >/dev/null 2>&1 || true; rm -rf "$STATE"' EXIT

on0() { bash "$CLUSTER" run "${FLAGS[@]}" 0 "$@"; }
listed() {
  on0 "$B/gradsync" list --server="$SERVER" --json | python3 -c '
import json, sys
print(",".join(w["id"] for w in json.load(sys.stdin)["workers"]))'
}
job() {  # a ring bench job: its rows, then the ranks it ran on
  local out id
  out=$(on0 "$B/gradsync" bench --server="$SERVER" --workers=4 --sizes="$SIZES" --iters=3 \
    --warmup=1 --algorithm=ring --quiet)
  grep -E '^ +[0-9]+ ' <<<"$out"
  id=$(grep -o 'job j-[^ ]*' <<<"$out" | head -1 | cut -d' ' -f2)
  on0 "$B/gradsync" list --server="$SERVER" --json | python3 -c '
import json, sys
job = [j for j in json.load(sys.stdin)["jobs"] if j["job_id"] == sys.argv[1]]
print("ranks: " + (",".join(job[0]["worker_ids"]) if job else "(job %s not listed)" % sys.argv[1]))' "$id"
}
rejoin() {  # worker 1 of host $1 leaves and joins again
  local h=$1 k pid=""
  for k in $(ip netns pids "$PREFIX-h$h"); do
    grep -qa -- "--id=h$h-1" "/proc/$k/cmdline" 2>/dev/null && pid=$k
  done
  [[ -n $pid ]] || { echo "netem_rank_order: no worker h$h-1" >&2; exit 1; }
  kill -TERM "$pid"
  for ((k = 0; k < 50; k++)); do
    [[ ,$(listed), != *,h$h-1,* ]] && break
    sleep 0.2
  done
  setsid ip netns exec "$PREFIX-h$h" env GRADSYNC_TOKEN="$(<"$STATE/$PREFIX/token")" \
    "$B/gradsync-worker" --coordinator="$SERVER" --id="h$h-1" --listen="10.77.0.1$h:7001" \
    --advertise="10.77.0.1$h:7001" >"$STATE/h$h-1-again.log" 2>&1 </dev/null &
  for ((k = 0; k < 50; k++)); do
    [[ $(listed) == *,h$h-1 ]] && return 0
    sleep 0.2
  done
  echo "netem_rank_order: h$h-1 did not join again" >&2; exit 1
}

bash "$CLUSTER" up "${FLAGS[@]}" --hosts=3 --rate=1gbit --limit=8388608 \
  --start-daemons --workers-per-host=2 --build-dir="$BUILD_DIR" >"$STATE/up.log" 2>&1 ||
  { cat "$STATE/up.log" >&2; echo "netem_rank_order: up failed" >&2; exit 1; }
echo "joined host by host ($(listed)):"
job
rejoin 1
rejoin 2
echo "joined interleaved ($(listed)):"
job
