#!/usr/bin/env bash
# Packs what a run on the lent GPU machine needs (see ../shared/DEVICE_NOTES.md)
# into .devbundle/ (git-ignored): the binaries, the GPU test binaries, their
# non-system shared libraries, Fashion-MNIST and the PyTorch baseline script.
# Build first with CUDA on: GRADSYNC_CUDA=ON bash deploy/build.sh
# Then, with the device tool: carry [".devbundle"] and run
#   bash .devbundle/run-gpu-checks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
rm -rf .devbundle && mkdir -p .devbundle/bin .devbundle/lib .devbundle/data
cp $B/bin/gradsync $B/bin/gradsync-server $B/bin/gradsync-worker .devbundle/bin/
for t in cuda_tests cuda_trainer_test sync_tests collectives_tests; do
  [ -x $B/tests/$t ] && cp $B/tests/$t .devbundle/bin/
done
strip .devbundle/bin/*   # the carry limit is 64 MiB for the whole tree
for b in .devbundle/bin/*; do ldd "$b"; done | awk '/=>/{print $3}' | sort -u \
  | grep -vE '/(libc|libm|libgcc_s|libstdc\+\+|libpthread|libdl|librt)\.so' \
  | grep -v '/usr/local/cuda' | grep -v 'libcuda\.so' \
  | xargs -I{} cp -L {} .devbundle/lib/
strip --strip-unneeded .devbundle/lib/* 2>/dev/null || true
cp /usr/share/datasets/fashion-mnist/*.gz .devbundle/data/
cp bench/torch_compare.py .devbundle/
cat > .devbundle/run-gpu-checks.sh <<'RUN'
#!/usr/bin/env bash
# On the GPU machine: GPU tests, CPU-vs-GPU equivalence, throughput, PyTorch.
set -x
D=$(cd "$(dirname "$0")" && pwd)
[ -d $D/bin ] || tar -C $D -xJf $D/bin-lib.tar.xz
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi
# The equivalence tests read the dataset from the default path.
mkdir -p /usr/share/datasets/fashion-mnist 2>/dev/null && cp -n $D/data/*.gz /usr/share/datasets/fashion-mnist/ 2>/dev/null
$D/bin/cuda_tests 2>&1 | tail -40
$D/bin/cuda_trainer_test 2>&1 | tail -20
for m in 784-256-128-10 784-4096-4096-10; do
  for dev in cpu cuda; do
    $D/bin/gradsync local --device=$dev --workers 1 --steps 300 --model=mlp:$m \
      --data-dir=$D/data --quiet --results=$OUT/one-$dev-$m.json | tail -3
  done
done
$D/bin/gradsync local --device=cuda --compare --workers 4 --epochs 1 \
  --data-dir=$D/data --results=$OUT/compare-cuda.json | tail -12
python3 $D/torch_compare.py --data-dir $D/data --workers 4 --steps 300 | tee $OUT/torch.json
RUN
chmod +x .devbundle/run-gpu-checks.sh
# Binaries and libraries compress well (OpenBLAS alone is 36 MB); the data is
# already gzip. The run script unpacks them first.
tar -C .devbundle -cJf .devbundle/bin-lib.tar.xz bin lib
rm -rf .devbundle/bin .devbundle/lib
du -sh .devbundle
