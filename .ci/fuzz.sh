#!/usr/bin/env bash
# Short libFuzzer runs over gradsync's hostile-input parsers (issue 9).
#
# Configures a separate clang build directory (CUDA, tests and benchmarks off,
# -DGRADSYNC_FUZZ=ON; the project libraries compiled with
# -fsanitize=fuzzer-no-link,address,undefined), builds only the fuzz targets of
# tests/fuzz (target gradsync_fuzz), then runs each of
#   fuzz_tensor_frame  DecodedFrame::Parse over sliced ByteBuffers
#   fuzz_job_spec      ValidateJobSpec / ParseModelSpec / Parse* names
#   fuzz_idx_loader    LoadFashionMnist over arbitrary IDX image+label files
#   fuzz_tensor_data   LoadTensorData (--data=tensors:PATH) over arbitrary files,
#                      seeded with real torch.save files (built with libtorch
#                      only; without it the script says SKIPPED for it)
# for FUZZ_SECONDS with -rss_limit_mb=2048 -timeout=10, starting from a COPY of
# its seed corpus tests/fuzz/corpus/<target>/ (the repository is never
# written). Exits non-zero if any target crashes, leaks, times out or runs out
# of memory, printing the saved crash input path and its libFuzzer log.
#
# Run by hand from anywhere in the checkout (needs clang, libFuzzer and the
# packages from deploy/install-deps.sh):
#   bash .ci/fuzz.sh                        # 30 s per target
#   FUZZ_SECONDS=600 bash .ci/fuzz.sh       # longer
# Reproduce a crash:  build-fuzz/tests/fuzz/<target> <crash-file>
# Environment:
#   FUZZ_SECONDS    seconds per target (default 30)
#   FUZZ_BUILD_DIR  build directory (default: build-fuzz in the checkout)
#   FUZZ_JOBS       parallel compile jobs (default 2)
#   FUZZ_TARGETS    space-separated subset of the targets above (default all)
#   FUZZ_OUT        where corpora copies, logs and crash files go
#                   (default: a fresh mktemp -d directory, kept on failure)
set -euo pipefail
cd "$(dirname "$0")/.."
SRC_DIR="$PWD"
BUILD_DIR="${FUZZ_BUILD_DIR:-build-fuzz}"
SECONDS_PER_TARGET="${FUZZ_SECONDS:-30}"
JOBS="${FUZZ_JOBS:-2}"
TARGETS="${FUZZ_TARGETS:-fuzz_tensor_frame fuzz_job_spec fuzz_idx_loader fuzz_tensor_data}"
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"

start=$SECONDS
CC=clang CXX=clang++ cmake -S "$SRC_DIR" -B "$BUILD_DIR" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGRADSYNC_CUDA=OFF -DGRADSYNC_BUILD_BENCH=OFF -DGRADSYNC_BUILD_TESTS=OFF \
  -DGRADSYNC_FUZZ=ON \
  "-DCMAKE_C_FLAGS=$SAN" "-DCMAKE_CXX_FLAGS=$SAN" >/dev/null
cmake --build "$BUILD_DIR" --target gradsync_fuzz -j"$JOBS"
echo "fuzz: configure + build took $((SECONDS - start)) s"

OUT="${FUZZ_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/gradsync-fuzz.XXXXXX")}"
mkdir -p "$OUT"
failed=0
for t in $TARGETS; do
  bin="$BUILD_DIR/tests/fuzz/$t"
  if [ "$t" = fuzz_tensor_data ] && [ ! -x "$bin" ]; then
    echo "SKIPPED: fuzz: $t: built without libtorch (GRADSYNC_TORCH; libtorch-dev)"
    continue
  fi
  corpus="$OUT/$t/corpus"
  artifacts="$OUT/$t/artifacts/"
  log="$OUT/$t/fuzz.log"
  rm -rf "${OUT:?}/$t"
  mkdir -p "$corpus" "$artifacts"
  cp -R "$SRC_DIR/tests/fuzz/corpus/$t/." "$corpus/"
  echo "fuzz: $t for ${SECONDS_PER_TARGET}s"
  rc=0
  "$bin" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$artifacts" "$corpus" \
    >"$log" 2>&1 || rc=$?
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)"
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "fuzz: $t FAILED (exit $rc) after ${runs:-?} runs; log: $log" >&2
    tail -n 60 "$log" >&2
    for f in "$artifacts"*; do
      [ -e "$f" ] && echo "fuzz: $t crash input: $f (reproduce: $bin $f)" >&2
    done
  else
    echo "fuzz: $t ok, ${runs:-?} runs"
  fi
done

echo "fuzz: total $((SECONDS - start)) s"
if [ "$failed" -ne 0 ]; then
  echo "fuzz: FAILED; crash inputs and logs kept under $OUT" >&2
  exit 1
fi
[ -n "${FUZZ_OUT:-}" ] || rm -rf "$OUT"
