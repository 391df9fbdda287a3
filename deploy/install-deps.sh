#!/usr/bin/env bash
# Installs exactly the Debian 12 packages gradsync builds and runs with
# (clang and libclang-rt-14-dev: CI's thread-safety pass and libFuzzer targets;
# openssl: deploy/make-dev-certs.sh, which the TLS tests run; the linters
# clang-format, shellcheck and python3-flake8: .ci/lint.sh; libtorch-dev and
# python3-torch: TorchScript models, worker/model/torch, and the scripts in
# examples/models that write them; python3-grpcio and python3-protobuf: the
# Python client in python/gradsync; slurm-wlm and munge: deploy/slurm and its
# test, which start a real slurmctld and slurmd on this machine; chromium: the
# dashboard's headless-browser test, tests/dashboard; lld: links 5x faster
# than GNU ld, CMakeLists.txt; ninja-build: schedules a 2-core build better
# than make, deploy/build.sh).
# Needs root (or sudo). CUDA is not installed here: the CUDA backend builds
# when nvcc exists (e.g. /usr/local/cuda), see docs/gpu.md.
#   install-deps.sh          everything (build, tests, benchmarks, CI, dataset)
#   install-deps.sh run      what the README's first command needs: what the
#                            three binaries build with, and the Fashion-MNIST
#                            data set the local comparison trains on
#   install-deps.sh build    only what the three binaries build with (the
#                            image's build stage, deploy/Dockerfile)
#   install-deps.sh torch    only libtorch-dev (the image's GRADSYNC_TORCH=ON
#                            variant adds it to `build`)
#   install-deps.sh docker   the container tools deploy/compose-test.sh uses
#                            (Debian's docker.io, the v1 docker-compose,
#                            debootstrap)
#   install-deps.sh k8s      what deploy/k8s/check.sh uses: kubectl (Debian's
#                            kubernetes-client, unless one is on PATH) and
#                            python3-yaml
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
BUILD="build-essential cmake pkg-config libgrpc++-dev protobuf-compiler-grpc
  libprotobuf-dev protobuf-compiler libabsl-dev libspdlog-dev libopenblas-dev
  zlib1g-dev nlohmann-json3-dev libcpp-httplib-dev libsqlite3-dev libssl-dev lld ninja-build"
case "${1:-all}" in
  all) PKGS="$BUILD clang libclang-rt-14-dev libgtest-dev libgmock-dev
         libbenchmark-dev libgloo-dev python3-matplotlib dataset-fashion-mnist
         openssl clang-format shellcheck python3-flake8 libtorch-dev
         python3-torch python3-grpcio python3-protobuf slurm-wlm munge chromium" ;;
  run) PKGS="$BUILD dataset-fashion-mnist" ;;
  build) PKGS="$BUILD" ;;
  torch) PKGS="libtorch-dev" ;;
  docker) PKGS="docker.io docker-compose debootstrap" ;;
  k8s) PKGS="python3-yaml"
       command -v kubectl >/dev/null || PKGS="$PKGS kubernetes-client" ;;
  *) echo "usage: install-deps.sh [all|run|build|torch|docker|k8s]" >&2; exit 2 ;;
esac
T0=$SECONDS
$SUDO apt-get update -qq
T1=$SECONDS
# shellcheck disable=SC2086  # PKGS is a word list
$SUDO apt-get install -y -qq --no-install-recommends $PKGS
# What each phase took, so that a slow first run can be read off its log.
echo "install-deps: apt-get update took $((T1 - T0)) s, install $((SECONDS - T1)) s"
