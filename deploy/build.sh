#!/usr/bin/env bash
# Configures and builds gradsync into ./build (binaries in build/bin).
# GRADSYNC_CUDA=ON|OFF|AUTO (default AUTO: CUDA backend when nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGRADSYNC_CUDA="${GRADSYNC_CUDA:-AUTO}" >/dev/null
cmake --build build -j"$(nproc)"
