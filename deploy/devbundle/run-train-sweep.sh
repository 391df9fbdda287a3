#!/usr/bin/env bash
# On the GPU machine (16 cores): the four modes training on emulated hosts,
#   bash .devbundle/run-train-sweep.sh a --workers=1,2,4,8 --epochs=2
# NAME and bench/experiments/experiment_train.py run's flags (--network=emulated, the
# bundle's binaries and Fashion-MNIST are given here); the results come back
# as $OUT/train-NAME.tar.gz (redraw here with experiment_train.py plot).
# SWEEP_LIMIT (seconds, default 530) bounds the run so the tarball is
# always written.
set -u
D=$(cd "$(dirname "$0")" && pwd)
[ -d "$D/bin" ] || tar -C "$D" -xJf "$D/bin-lib.tar.xz"
export PATH=$D/net/bin:$PATH
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
name=${1:?usage: run-train-sweep.sh NAME [experiment_train.py run flags]}; shift
OUT=${OUT:-/tmp/sweep-out}; mkdir -p "$OUT"
ip -V && tc -V || exit 1
timeout "${SWEEP_LIMIT:-530}" python3 "$D/../bench/experiments/experiment_train.py" run \
  --network=emulated --build-dir="$D" --data-dir="$D/data" \
  --out="/tmp/train-$name" "$@" 2>&1 | tail -60
tar -C /tmp -czf "$OUT/train-$name.tar.gz" "train-$name"
