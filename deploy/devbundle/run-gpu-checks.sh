#!/usr/bin/env bash
# On the GPU machine: the test binaries, CPU-vs-GPU throughput, the strategy
# comparison on the GPU and the PyTorch baseline; one summary table at the
# end. Usage: run-gpu-checks.sh [all|tests|perf]. Every command has its own
# time limit, so one hang costs minutes, not the session.
set -u
PHASE=${1:-all}
D=$(cd "$(dirname "$0")" && pwd)
[ -d "$D/bin" ] || tar -C "$D" -xJf "$D/bin-lib.tar.xz"
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/gpu-checks-out}
W=$(mktemp -d /tmp/gpu-checks.XXXXXX)   # raw results, packed into raw.tar.gz
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv \
  || echo "nvidia-smi failed"
# The tests read Fashion-MNIST from its default path (and skip, saying so,
# when it is missing).
mkdir -p /usr/share/datasets/fashion-mnist 2>/dev/null \
  && cp -n "$D"/data/*.gz /usr/share/datasets/fashion-mnist/ 2>/dev/null

if [ "$PHASE" = all ] || [ "$PHASE" = tests ]; then
  # name:seconds; GPU tests first.
  for spec in cuda_tests:300 cuda_trainer_test:240 train_tests:120 \
              sync_tests:240 collectives_tests:180; do
    t=${spec%%:*}; limit=${spec##*:}
    if [ ! -x "$D/bin/$t" ]; then echo "missing" > "$W/$t.rc"; continue; fi
    echo "=== $t (limit ${limit}s)" | tee -a "$OUT/tests.log"
    timeout "$limit" "$D/bin/$t" --gtest_output="json:$W/$t.json" \
      > "$W/$t.log" 2>&1
    echo $? > "$W/$t.rc"
    # Failures and the final counts into the log that comes back.
    grep -E '^\[  (FAILED|PASSED|SKIPPED) |Failure|error|Expected|Which is|actual' \
      "$W/$t.log" | grep -vE '^\[  SKIPPED \] [^0-9]' | head -200 \
      >> "$OUT/tests.log"
    tail -3 "$W/$t.log" >> "$OUT/tests.log"
  done
  python3 "$D/gpu_summary.py" --merge-tests "$W" > "$OUT/tests.json"
fi

if [ "$PHASE" = all ] || [ "$PHASE" = perf ]; then
  {
    for m in 784-256-128-10 784-4096-4096-10; do
      for dev in cpu cuda; do
        echo "=== one worker, $dev, mlp:$m, 300 steps"
        timeout 300 "$D/bin/gradsync" local --device=$dev --workers 1 \
          --steps 300 --model=mlp:$m --data-dir="$D/data" --quiet \
          --results="$W/one-$dev-$m.json" 2>&1 | tail -5
      done
    done
    echo "=== compare, cuda, 4 workers, 1 epoch"
    timeout 420 "$D/bin/gradsync" local --device=cuda --compare --workers 4 \
      --epochs 1 --data-dir="$D/data" --results="$W/compare-cuda.json" 2>&1 \
      | tail -14
    for m in 784-256-128-10 784-4096-4096-10; do
      echo "=== PyTorch, mlp:$m, single process and DDP (4 processes, gloo)"
      timeout 300 python3 "$D/torch_compare.py" --data-dir "$D/data" \
        --widths $m --workers 4 --steps 300 2>&1 | tee "$W/torch-$m.jsonl"
    done
  } > "$OUT/perf.log" 2>&1
  python3 "$D/gpu_summary.py" --merge-perf "$W" > "$OUT/perf.json"
fi

tar -C "$W" -czf "$OUT/raw.tar.gz" . 2>/dev/null
python3 "$D/gpu_summary.py" "$OUT" | tee "$OUT/summary.txt"
