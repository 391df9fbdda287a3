#!/usr/bin/env bash
# Installs exactly the Debian 12 packages gradsync builds and runs with
# (clang and libclang-rt-14-dev: CI's thread-safety pass and libFuzzer targets).
# Needs root (or sudo). CUDA is not installed here: the CUDA backend builds
# when nvcc exists (e.g. /usr/local/cuda), see README.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake pkg-config clang libclang-rt-14-dev \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
  libabsl-dev libspdlog-dev libopenblas-dev zlib1g-dev nlohmann-json3-dev \
  libgtest-dev libgmock-dev libbenchmark-dev libgloo-dev libcpp-httplib-dev \
  libsqlite3-dev python3-matplotlib \
  dataset-fashion-mnist
