#!/usr/bin/env bash
# The data-plane targets on emulated hosts: 1 + N network namespaces on
# --rate links (bench/experiments/netem-cluster.sh), the coordinator on h0, a worker and
# a PS shard on each of h1..hN, then bench jobs from h0:
#   allreduce ring, allreduce hd, pushpull with S = N shards (one per host),
# each over --sizes. Prints every bench table and a summary of each size's
# time against the bandwidth bound of the link:
#   ring / hd:         2(N-1)/N * K / B
#   pushpull, S = N colocated shards: every host sends its pushes to the N-1
#                      other shards and its shard answers N-1 workers, so each
#                      link also carries 2(N-1)/N * K: the same bound.
# with B the nominal rate (TCP/IP headers alone leave about 95% of it).
#
#   bash bench/experiments/netem_targets.sh [--workers=4] [--rate=1gbit] [--sizes=64M]
#                               [--iters=5] [--out=DIR] [--build-dir=build]
#                               [--wire_dtype=fp32|bf16|fp16]
#                               [--ps_partition_bytes=B]
#                               [--peer_bdp_probe=true|false]
#                               [--peer_bulk_bytes=B]
#
# With a 16-bit --wire_dtype the allreduce jobs send half the bytes; the
# bound stays the float32 one (so %bound may pass 100%), and pushpull is
# skipped (its bench checks exact float32 parameters). --ps_partition_bytes
# is the pushpull job's partition size (gradsync --help; default 1 MiB).
# --peer_bdp_probe is every worker's (gradsync --help; default true).
# --peer_bulk_bytes is the allreduce jobs' (gradsync --help; 0 = the default,
# 4 MiB; -1 = never use the bulk connections).
#
# Root only (network namespaces). Always tears the cluster down (trap).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORKERS=4 RATE=1gbit SIZES=64M ITERS=5 OUT=netem-results BUILD=build WIRE=fp32
PARTITION=0
BDP=""
BULK=0
for arg in "$@"; do
  case $arg in
    --workers=*) WORKERS=${arg#*=} ;;
    --rate=*) RATE=${arg#*=} ;;
    --sizes=*) SIZES=${arg#*=} ;;
    --iters=*) ITERS=${arg#*=} ;;
    --out=*) OUT=${arg#*=} ;;
    --build-dir=*) BUILD=${arg#*=} ;;
    --wire_dtype=*) WIRE=${arg#*=} ;;
    --ps_partition_bytes=*) PARTITION=${arg#*=} ;;
    --peer_bdp_probe=*) BDP=${arg#*=} ;;
    --peer_bulk_bytes=*) BULK=${arg#*=} ;;
    -h|--help) sed -n 2,29p "$0"; exit 0 ;;
    *) echo "netem_targets: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
if [[ $WIRE != fp32 && $WIRE != bf16 && $WIRE != fp16 ]]; then
  echo "netem_targets: --wire_dtype must be fp32, bf16 or fp16" >&2
  exit 2
fi
if ! [[ $WORKERS =~ ^[0-9]+$ ]] || ((WORKERS < 2 || WORKERS > 16)); then
  echo "netem_targets: --workers must be 2..16" >&2
  exit 2
fi
PREFIX="gsbench$$"
SUBNET=10.79.0
SERVER="$SUBNET.10:50051"
STATE=$(mktemp -d /tmp/netem-targets.XXXXXX)
CLUSTER=(bash "$ROOT/bench/experiments/netem-cluster.sh")
FLAGS=(--prefix="$PREFIX" --state-dir="$STATE")
BIN=$(cd "$ROOT/$BUILD/bin" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

cleanup() {
  "${CLUSTER[@]}" down "${FLAGS[@]}" >/dev/null 2>&1 || true
  rm -rf "$STATE"
}
trap cleanup EXIT INT TERM

"${CLUSTER[@]}" up "${FLAGS[@]}" --hosts=$((WORKERS + 1)) --rate="$RATE" \
  --subnet="$SUBNET" --start-daemons --ps-on-workers --build-dir="$BUILD" \
  ${BDP:+--peer-bdp-probe="$BDP"}

bench() {  # bench NAME FLAGS...: one bench job from h0, JSON into $OUT
  local name=$1
  shift
  echo "=== $name"
  "${CLUSTER[@]}" run "${FLAGS[@]}" 0 "$BIN/gradsync" bench --server="$SERVER" \
    --workers="$WORKERS" --sizes="$SIZES" --iters="$ITERS" --warmup=2 \
    --quiet --results="$OUT/$name.json" "$@"
}
bench ring --op=allreduce --algorithm=ring --wire_dtype="$WIRE" --peer_bulk_bytes="$BULK"
bench hd --op=allreduce --algorithm=hd --wire_dtype="$WIRE" --peer_bulk_bytes="$BULK"
if [[ $WIRE == fp32 ]]; then
  bench pushpull --op=pushpull --ps_shards="$WORKERS" --ps_partition_bytes="$PARTITION"
else
  rm -f "$OUT/pushpull.json"
  echo "=== pushpull skipped: --wire_dtype=$WIRE (pushpull benches are float32)"
fi

python3 - "$OUT" "$WORKERS" "$RATE" <<'PY'
import json, re, sys
out, n, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3]
m = re.fullmatch(r"([0-9.]+)([kmgt]?)bit", rate)
scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
B = float(m.group(1)) * scale / 8  # bytes/s
print("\nbound = 2(N-1)/N * K / B, B = %s = %.1f MB/s, N = %d" % (rate, B / 1e6, n))
print("%-9s %12s %10s %10s %8s" % ("job", "bytes", "time_ms", "bound_ms", "%bound"))
summary = {}
for name in ("ring", "hd", "pushpull"):
    try:
        d = json.load(open("%s/%s.json" % (out, name)))
    except (OSError, ValueError) as e:
        print("%-9s no results (%s)" % (name, e))
        continue
    for r in d.get("rows", []):
        k = r["bytes"]
        bound = 2 * (n - 1) / n * k / B
        t = r["time_seconds"]
        summary.setdefault(name, {})[k] = t
        print("%-9s %12d %10.1f %10.1f %7.1f%% %s" % (
            name, k, t * 1e3, bound * 1e3, 100 * bound / t,
            "" if r.get("ok") else "FAILED"))
for k in summary.get("ring", {}):
    if k in summary.get("hd", {}):
        print("hd/ring time at %d bytes: %.3f" % (k, summary["hd"][k] / summary["ring"][k]))
json.dump(summary, open("%s/summary.json" % out, "w"), indent=1)
PY
