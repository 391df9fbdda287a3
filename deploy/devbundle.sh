#!/usr/bin/env bash
# Packs what a run on the lent GPU machine needs (see docs/gpu.md)
# into .devbundle/ (git-ignored): the binaries, every test binary, their
# non-system shared libraries, Fashion-MNIST, the PyTorch baseline script, the
# check script run-gpu-checks.sh and its summary script gpu_summary.py, and the
# sweep scripts run-sweep.sh and run-train-sweep.sh (all four copied from
# deploy/devbundle/, with net-wrapper.sh copied in as the ip and tc wrappers).
#
# Build first with CUDA on (GRADSYNC_CUDA=ON bash deploy/build.sh, or any
# build directory: BUILD_DIR=build-x bash deploy/devbundle.sh). Then, with the
# device tool: carry [".devbundle"] and run
#   bash .devbundle/run-gpu-checks.sh            # everything (~5-8 minutes)
#   bash .devbundle/run-gpu-checks.sh tests      # only the test binaries
#   bash .devbundle/run-gpu-checks.sh perf       # only the measurements
#   bash .devbundle/run-sweep.sh NAME [experiment.py run flags]
#                          # issue 8's sweep on emulated hosts (16 cores);
#                          # docs/experiments.md's re-sweep command redoes
#                          # the small sizes in ~4 min (then plot --base here)
#   bash .devbundle/run-train-sweep.sh NAME [experiment_train.py run flags]
#                          # the four modes training on emulated hosts
#   bash bench/experiments/latency_vs_n.sh --build-dir=.devbundle
#                          # small-allreduce latency against N: bare gRPC,
#                          # plain processes, daemons (~1 minute)
# Each phase leaves at most 6 files in $OUT (the device tool returns 8):
# tests.json + tests.log, perf.json + perf.log, summary.txt, raw.tar.gz. The
# summary table is printed at the end and can be rebuilt here from one or
# more fetched $OUT folders:
#   python3 .devbundle/gpu_summary.py DIR [DIR...]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
TESTS="cuda_tests cuda_trainer_test train_tests sync_tests collectives_tests"
rm -rf .devbundle && mkdir -p .devbundle/bin .devbundle/lib .devbundle/data
cp "$B"/bin/gradsync "$B"/bin/gradsync-server "$B"/bin/gradsync-worker \
  .devbundle/bin/
# The worker's CUDA backend is a plugin it opens from beside itself
# (worker/model/plugin_loader.h); the libtorch one stays out (libtorch is
# hundreds of MiB, over the carry limit).
if [ -f "$B/bin/libgradsync_cuda.so" ]; then
  cp "$B/bin/libgradsync_cuda.so" .devbundle/bin/
else
  echo "devbundle: $B/bin/libgradsync_cuda.so not built: workers will offer no GPU" >&2
fi
for t in $TESTS; do
  if [ -x "$B/tests/$t" ]; then
    cp "$B/tests/$t" .devbundle/bin/
  else
    echo "devbundle: $B/tests/$t not built; the checks will report it missing" >&2
  fi
done
# bench/experiments/latency_vs_n.sh --build-dir=.devbundle runs these beside gradsync.
for t in grpc_latency_probe allreduce_compare; do
  if [ -x "$B/bench/$t" ]; then
    cp "$B/bench/$t" .devbundle/bin/
  else
    echo "devbundle: $B/bench/$t not built; bench/experiments/latency_vs_n.sh will say so" >&2
  fi
done
strip .devbundle/bin/*   # the carry limit is 64 MiB for the whole tree
for b in .devbundle/bin/*; do ldd "$b"; done | awk '/=>/{print $3}' | sort -u \
  | grep -vE '/(libc|libm|libgcc_s|libstdc\+\+|libpthread|libdl|librt)\.so' \
  | grep -v '/usr/local/cuda' | grep -v 'libcuda\.so' \
  | xargs -I{} cp -L {} .devbundle/lib/
strip --strip-unneeded .devbundle/lib/* 2>/dev/null || true
cp /usr/share/datasets/fashion-mnist/*.gz .devbundle/data/
cp bench/peers/torch_compare.py .devbundle/

# The scripts run on the device: files in deploy/devbundle/, copied to the
# top of the bundle (tests/deploy/devbundle_test.sh checks that they exist).
BUNDLE_SCRIPTS=(run-gpu-checks.sh gpu_summary.py run-sweep.sh run-train-sweep.sh)
for f in "${BUNDLE_SCRIPTS[@]}"; do
  cp "deploy/devbundle/$f" .devbundle/
  chmod +x ".devbundle/$f"
done

# The emulated hosts of issue 8's experiment (bench/experiments/netem-cluster.sh) need
# ip and tc, which the GPU machine lacks (its kernel has veth, bridge and
# tbf; not sch_netem): this machine's iproute2 and its libraries, behind
# wrappers that point the loader at them.
if command -v ip >/dev/null && command -v tc >/dev/null; then
  mkdir -p .devbundle/net/bin .devbundle/net/real .devbundle/net/lib
  for b in ip tc; do
    cp -L "$(command -v $b)" .devbundle/net/real/
    cp deploy/devbundle/net-wrapper.sh .devbundle/net/bin/$b
    chmod +x .devbundle/net/bin/$b
  done
  for b in .devbundle/net/real/*; do ldd "$b"; done | awk '/=>/{print $3}' \
    | sort -u | grep -vE '/(libc|libm|libpthread|libdl|librt)\.so' \
    | xargs -I{} cp -L {} .devbundle/net/lib/
else
  echo "devbundle: no ip/tc here (apt-get install iproute2); run-sweep.sh will not work" >&2
fi

# Binaries and libraries compress well (OpenBLAS alone is 36 MB); the data is
# already gzip. The run script unpacks them first.
tar -C .devbundle -cJf .devbundle/bin-lib.tar.xz bin lib
rm -rf .devbundle/bin .devbundle/lib
du -sh .devbundle
