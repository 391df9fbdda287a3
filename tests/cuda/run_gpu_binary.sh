#!/bin/sh
# Runs a GPU test binary whole, as ctest's one test for it on a machine
# without an NVIDIA driver (tests/CMakeLists.txt): each of its tests would
# otherwise be a process of its own that loads cuBLAS (~0.45 s) only to
# skip. A failing test fails it (its output is printed); when tests
# skipped (no GPU), it prints "SKIPPED: ..." with gtest's count and exits 77,
# which ctest reports as Skipped; when every test ran and passed, exit 0.
#   sh tests/cuda/run_gpu_binary.sh BINARY [gtest flags]
bin=$1
shift
out=$("$bin" "$@" 2>&1)
rc=$?
if [ "$rc" -ne 0 ]; then
  printf '%s\n' "$out"
  exit "$rc"
fi
passed=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p')
skipped=$(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p')
reason=$(printf '%s\n' "$out" | grep -m1 -A1 ': Skipped$' | tail -n 1)
if [ -n "$skipped" ] && [ "$skipped" -gt 0 ]; then
  echo "SKIPPED: ${skipped} tests of $(basename "$bin") (${passed:-0} passed): ${reason:-no GPU}"
  exit 77
fi
echo "$(basename "$bin"): ${passed:-0} tests passed"
exit 0
