#!/usr/bin/env bash
# Configures and builds gradsync into ./build (binaries in build/bin).
#   build.sh        everything: the three binaries, every test and benchmark
#   build.sh run    only gradsync, gradsync-server and gradsync-worker (the
#                   README's first command); tests and benchmarks are not
#                   configured, so their packages need not be installed
# GRADSYNC_CUDA=ON|OFF|AUTO (default AUTO: CUDA backend when nvcc is found).
# GRADSYNC_TORCH=ON|OFF|AUTO (default AUTO: TorchScript models when Debian's
# libtorch-dev is installed; `install-deps.sh` installs it, `run` does not).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-all}" in
  all) EXTRA=(-DGRADSYNC_BUILD_TESTS=ON -DGRADSYNC_BUILD_BENCH=ON); TARGETS=() ;;
  run) EXTRA=(-DGRADSYNC_BUILD_TESTS=OFF -DGRADSYNC_BUILD_BENCH=OFF)
       TARGETS=(--target gradsync gradsync-server gradsync-worker) ;;
  *) echo "usage: build.sh [all|run]" >&2; exit 2 ;;
esac
# Ninja (install-deps.sh installs it) schedules the two cores better than
# make: a full build 341 s -> 310 s. A tree configured before keeps its own.
GEN=()
if [ ! -f build/CMakeCache.txt ] && command -v ninja >/dev/null; then GEN=(-G Ninja); fi
T0=$SECONDS
cmake "${GEN[@]}" -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGRADSYNC_CUDA="${GRADSYNC_CUDA:-AUTO}" -DGRADSYNC_TORCH="${GRADSYNC_TORCH:-AUTO}" \
  "${EXTRA[@]}" >/dev/null
T1=$SECONDS
cmake --build build -j"$(nproc)" "${TARGETS[@]}"
# What each phase took (configure, compile and link), read off any log.
echo "build: configure took $((T1 - T0)) s, build $((SECONDS - T1)) s"
