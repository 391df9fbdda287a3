# The boilerplate every gradsync target shares, in one place.
#
#   gradsync_library(NAME SOURCES a.cc ... [PUBLIC deps...] [PRIVATE deps...])
#     A static library whose headers are included from the source root
#     ("worker/collectives/ring.h"), compiled with GRADSYNC_WARNINGS.
#   gradsync_executable(NAME SOURCES a.cc ... [LIBS deps...])
#     A program (a benchmark, a probe) compiled with GRADSYNC_WARNINGS.
#   gradsync_test(NAME SOURCES a_test.cc ... [LIBS deps...]
#                 [PROPERTIES prop value ...])
#     A GoogleTest executable (gtest_main) whose tests CTest discovers, each
#     with the given test properties (TIMEOUT 120, LABELS x, ...).
#
# One library per folder (its CMakeLists.txt beside its sources), so a
# library's name says where its code is.

function(gradsync_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC;PRIVATE" ${ARGN})
  add_library(${name} ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE ${GRADSYNC_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_PUBLIC} PRIVATE ${ARG_PRIVATE})
endfunction()

function(gradsync_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${GRADSYNC_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS})
endfunction()

# By default every gtest test is a ctest test of its own (gtest_discover_tests).
# WHOLE: the binary is one ctest test, for suites whose every process pays a
# fixed start-up (libtorch's ~1 s) that dwarfs its tests.
# SHARDS n: the binary is n ctest tests, NAME_shard<i>of<n>, each running
# every n-th gtest test (gtest's GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX;
# SHARDS 1 is WHOLE), for suites of hundreds of sub-second tests: a ctest
# test costs ~0.06 s of slot time to start whatever it runs, which over a
# thousand tests was a minute of a 2-core machine's ctest. Every test still
# runs; a failing shard's output names the failing test, and one test runs
# alone with  build/tests/NAME --gtest_filter=Suite.Test
function(gradsync_test name)
  cmake_parse_arguments(ARG "WHOLE" "SHARDS" "SOURCES;LIBS;PROPERTIES" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${GRADSYNC_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest_main)
  if(ARG_WHOLE OR ARG_SHARDS EQUAL 1)
    add_test(NAME ${name} COMMAND ${name})
    if(ARG_PROPERTIES)
      set_tests_properties(${name} PROPERTIES ${ARG_PROPERTIES})
    endif()
  elseif(ARG_SHARDS)
    math(EXPR last "${ARG_SHARDS} - 1")
    foreach(i RANGE ${last})
      set(test "${name}_shard${i}of${ARG_SHARDS}")
      add_test(NAME ${test} COMMAND ${name})
      set_tests_properties(${test} PROPERTIES
        ENVIRONMENT "GTEST_TOTAL_SHARDS=${ARG_SHARDS};GTEST_SHARD_INDEX=${i}"
        ${ARG_PROPERTIES})
    endforeach()
  elseif(ARG_PROPERTIES)
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ${ARG_PROPERTIES})
  else()
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
  endif()
endfunction()
