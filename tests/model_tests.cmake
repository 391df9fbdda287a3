# Unit tests for the model/data/common pieces (no gRPC). Included from
# tests/CMakeLists.txt after find_package(GTest) and include(GoogleTest).
add_executable(model_unit_tests
  ${CMAKE_CURRENT_LIST_DIR}/kernels_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/partition_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/mlp_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/dataset_test.cc
)
target_compile_options(model_unit_tests PRIVATE ${GRADSYNC_WARNINGS})
target_link_libraries(model_unit_tests PRIVATE gradsync_model GTest::gtest_main)
gtest_discover_tests(model_unit_tests DISCOVERY_TIMEOUT 60)
