#!/usr/bin/env bash
# Clang thread-safety analysis over gradsync's own C++ sources.
#
# The build uses GCC, which ignores Abseil's ABSL_GUARDED_BY /
# ABSL_EXCLUSIVE_LOCKS_REQUIRED / ... annotations. This pass checks them: it
# configures a separate CMake build directory (CUDA off, benchmarks off, tests
# on, compile_commands.json exported), builds only the generated protobuf/gRPC
# code (targets gradsync_proto, gradsync_health_proto) so that includes
# resolve, and then runs
#   clang++ -fsyntax-only -Wno-everything -Wthread-safety -Werror=thread-safety
# on every project unity batch (8 .cc files; GRADSYNC_TSA_UNITY=0: on every
# project .cc file) in compile_commands.json (generated *.pb.cc and anything
# else under a build directory excluded), with that entry's include paths,
# defines and language standard (all other flags are dropped). Other clang
# warnings are switched off and never fail the pass; a file that clang cannot
# compile at all does fail it (it was not checked).
#
# Exits non-zero, printing clang's diagnostics, if any file has a thread-safety
# error (or does not compile under clang); always ends with one summary line:
#   thread-safety: N files checked, M errors
#
# Run by hand from anywhere in the checkout (needs clang++, cmake and the
# packages from deploy/install-deps.sh; installs nothing):
#   bash .ci/thread-safety.sh
# Environment:
#   GRADSYNC_TSA_BUILD_DIR  build directory (default: build-tsa in the checkout)
#   GRADSYNC_TSA_JOBS       files checked in parallel (default: nproc)
#   GRADSYNC_TSA_UNITY      1 (default): unity batches; 0: file by file
#   CLANGXX                 the clang++ to use (default: clang++)
set -euo pipefail
cd "$(dirname "$0")/.."
SRC_DIR="$PWD"
BUILD_DIR="${GRADSYNC_TSA_BUILD_DIR:-build-tsa}"
JOBS="${GRADSYNC_TSA_JOBS:-$(nproc)}"
CLANGXX="${CLANGXX:-clang++}"
TSA_FLAGS="-fsyntax-only -Wno-everything -Wthread-safety -Werror=thread-safety"

if ! command -v "$CLANGXX" >/dev/null 2>&1; then
  echo "thread-safety: '$CLANGXX' not found; install clang (deploy/install-deps.sh" \
       "does) or set CLANGXX" >&2
  exit 2
fi

start=$SECONDS
# In the build's unity batches (GRADSYNC_TSA_UNITY=1, the default) clang parses
# each heavy header (gradsync.grpc.pb.h ~3 s, gtest, Abseil) once per batch of
# 8 sources instead of once per source: half the time. GRADSYNC_TSA_UNITY=0
# checks file by file, which also proves every .cc compiles alone (a missing
# #include that a batch neighbour hides); run it after moving includes.
UNITY="${GRADSYNC_TSA_UNITY:-1}"
if [ "$UNITY" = 1 ]; then UNITY_FLAG=ON; else UNITY_FLAG=OFF; fi
cmake -S "$SRC_DIR" -B "$BUILD_DIR" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DGRADSYNC_UNITY_BUILD="$UNITY_FLAG" \
  -DGRADSYNC_CUDA=OFF -DGRADSYNC_BUILD_BENCH=OFF -DGRADSYNC_BUILD_TESTS=ON \
  >/dev/null
cmake --build "$BUILD_DIR" --target gradsync_proto gradsync_health_proto \
  -j"$JOBS" >/dev/null
BUILD_DIR="$(cd "$BUILD_DIR" && pwd)"

# One clang response file per source, made from compile_commands.json by CMake
# itself (string(JSON), separate_arguments), so no JSON tool is needed.
WORK="$BUILD_DIR/thread-safety"
rm -rf "$WORK"
mkdir -p "$WORK"
cat >"$WORK/extract.cmake" <<'EOF'
# cmake -DDB=compile_commands.json -DSRC=... -DBUILD=... -DOUT=dir -P extract.cmake
cmake_minimum_required(VERSION 3.22)
file(READ "${DB}" db)
string(JSON n LENGTH "${db}")
math(EXPR last "${n} - 1")
set(seen "")
set(count 0)
foreach(i RANGE ${last})
  string(JSON src GET "${db}" ${i} file)
  string(JSON dir GET "${db}" ${i} directory)
  get_filename_component(src "${src}" ABSOLUTE BASE_DIR "${dir}")
  file(RELATIVE_PATH rel "${SRC}" "${src}")
  file(RELATIVE_PATH relb "${BUILD}" "${src}")
  if(relb MATCHES "/Unity/unity_[0-9]+_cxx\\.cxx$")
    # A unity batch of project sources (the generated protobuf code's
    # batches are left out: there is nothing of ours in them).
    if(relb MATCHES "_proto\\.dir/" OR src IN_LIST seen)
      continue()
    endif()
    set(rel "${relb}")
  elseif(NOT src MATCHES "\\.(cc|cpp|cxx)$" OR src MATCHES "\\.pb\\.cc$"
     OR rel MATCHES "^\\.\\./" OR rel MATCHES "^build[^/]*/"
     OR NOT relb MATCHES "^\\.\\./" OR src IN_LIST seen)
    continue()
  endif()
  list(APPEND seen "${src}")
  string(JSON args ERROR_VARIABLE no_args GET "${db}" ${i} arguments)
  if(no_args)
    string(JSON cmd GET "${db}" ${i} command)
    separate_arguments(args UNIX_COMMAND "${cmd}")
  else()
    string(JSON nargs LENGTH "${db}" ${i} arguments)
    math(EXPR lastarg "${nargs} - 1")
    set(args "")
    foreach(j RANGE ${lastarg})
      string(JSON a GET "${db}" ${i} arguments ${j})
      list(APPEND args "${a}")
    endforeach()
  endif()
  # Keep include paths, defines and the standard; drop everything else
  # (optimisation, debug info, GCC warning flags, -o/-c).
  set(keep "")
  set(take_next "")
  foreach(a IN LISTS args)
    if(take_next)
      if(take_next STREQUAL "path")
        get_filename_component(a "${a}" ABSOLUTE BASE_DIR "${dir}")
      endif()
      list(APPEND keep "${a}")
      set(take_next "")
    elseif(a MATCHES "^-(I|isystem|iquote|idirafter)$")
      list(APPEND keep "${a}")
      set(take_next "path")
    elseif(a MATCHES "^-(D|U|include)$")
      list(APPEND keep "${a}")
      set(take_next "value")
    elseif(a MATCHES "^-(I|isystem|iquote|idirafter)(.+)$")
      get_filename_component(p "${CMAKE_MATCH_2}" ABSOLUTE BASE_DIR "${dir}")
      list(APPEND keep "-${CMAKE_MATCH_1}${p}")
    elseif(a MATCHES "^-(D|U).+" OR a MATCHES "^-std=" OR a STREQUAL "-pthread")
      list(APPEND keep "${a}")
    endif()
  endforeach()
  list(APPEND keep "${src}")
  set(rsp "")
  foreach(a IN LISTS keep)
    string(REPLACE "\\" "\\\\" a "${a}")
    string(REPLACE "\"" "\\\"" a "${a}")
    string(APPEND rsp "\"${a}\"\n")
  endforeach()
  math(EXPR count "${count} + 1")
  string(LENGTH "000${count}" len)
  math(EXPR from "${len} - 4")
  string(SUBSTRING "000${count}" ${from} 4 num)
  file(WRITE "${OUT}/${num}.rsp" "${rsp}")
  file(WRITE "${OUT}/${num}.src" "${rel}\n")
endforeach()
EOF
cmake -DDB="$BUILD_DIR/compile_commands.json" -DSRC="$SRC_DIR" \
  -DBUILD="$BUILD_DIR" -DOUT="$WORK" -P "$WORK/extract.cmake"

shopt -s nullglob
rsps=("$WORK"/*.rsp)
if [ "${#rsps[@]}" -eq 0 ]; then
  echo "thread-safety: no project sources found in $BUILD_DIR/compile_commands.json" >&2
  exit 2
fi

# Each file's diagnostics go to its own .log (no interleaving); its clang exit
# status to .rc.
# (The inner script is single-quoted on purpose: bash -c expands it.)
export CLANGXX TSA_FLAGS
# shellcheck disable=SC2016
printf '%s\0' "${rsps[@]}" | xargs -0 -n1 -P"$JOBS" bash -c '
  base="${1%.rsp}"
  if "$CLANGXX" $TSA_FLAGS @"$1" >"$base.log" 2>&1; then rc=0; else rc=$?; fi
  echo "$rc" >"$base.rc"' _

failed=0
for rsp in "${rsps[@]}"; do
  base="${rsp%.rsp}"
  if [ "$(cat "$base.rc")" != 0 ]; then
    failed=$((failed + 1))
    echo "=== $(cat "$base.src")"
    cat "$base.log"
  fi
done
# A finding in a header is reported once per including file: count each
# distinct diagnostic once.
cat "$WORK"/*.log >"$WORK/all.diag"
tsa_errors=$( { grep -E ': error: .*\[-Werror,-Wthread-safety' "$WORK/all.diag" \
  || true; } | sort -u | wc -l)
other_errors=$( { grep -E ': (fatal )?error: ' "$WORK/all.diag" \
  | grep -v -- '-Wthread-safety' || true; } | sort -u | wc -l)

summary="thread-safety: ${#rsps[@]} files checked, $tsa_errors errors"
if [ "$other_errors" -ne 0 ]; then
  summary+=" (and $other_errors other clang errors: those files were not fully checked)"
fi
summary+=" [$((SECONDS - start)) s]"
echo "$summary"
if [ "$failed" -ne 0 ]; then exit 1; fi
