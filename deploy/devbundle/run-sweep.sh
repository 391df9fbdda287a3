#!/usr/bin/env bash
# On the GPU machine (16 cores): issue 8's sweep on emulated hosts, e.g.
#   bash .devbundle/run-sweep.sh a --workers=2,3,4,5 --hier-hosts=2,3,4 ...
# NAME and bench/experiments/experiment.py run's flags; the results come back as
# $OUT/exp-NAME.tar.gz (merge and redraw here with experiment.py plot).
# SWEEP_LIMIT (seconds, default 530) bounds the run so the tarball is
# always written. experiment.py runs each small point in --repeats-small=3
# jobs by default; the 2026-11-23 sweeps (one job each) took 9 min in two
# runs, so budget about a minute more per run, or pass --repeats-small=1.
set -u
D=$(cd "$(dirname "$0")" && pwd)
[ -d "$D/bin" ] || tar -C "$D" -xJf "$D/bin-lib.tar.xz"
export PATH=$D/net/bin:$PATH
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
name=${1:?usage: run-sweep.sh NAME [experiment.py run flags]}; shift
OUT=${OUT:-/tmp/sweep-out}; mkdir -p "$OUT"
ip -V && tc -V || exit 1
# The kernel's parts, before the sweep: veth and tbf.
if ip netns add gs-probe && ip -n gs-probe link add va type veth peer name vb &&
   tc -n gs-probe qdisc add dev va root tbf rate 1gbit burst 73728 limit 8388608; then
  echo "probe: veth + tbf ok"
else
  echo "probe: no veth or tbf here"; ip netns del gs-probe 2>/dev/null; exit 1
fi
ip netns del gs-probe
timeout "${SWEEP_LIMIT:-530}" python3 "$D/../bench/experiments/experiment.py" run \
  --build-dir="$D" --out="/tmp/exp-$name" "$@" 2>&1 | tail -80
tar -C /tmp -czf "$OUT/exp-$name.tar.gz" "exp-$name"
