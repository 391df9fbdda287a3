# Tests of the CUDA backend. Included from tests/CMakeLists.txt inside
# if(GRADSYNC_HAVE_CUDA), after find_package(GTest) and include(GoogleTest).
# Tests that need a GPU skip themselves when none is present.
add_executable(cuda_tests ${CMAKE_CURRENT_LIST_DIR}/cuda_test.cc)
target_compile_options(cuda_tests PRIVATE ${GRADSYNC_WARNINGS})
target_link_libraries(cuda_tests PRIVATE gradsync_cuda GTest::gtest_main)
gtest_discover_tests(cuda_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600)

# The bucketed trainer on the GPU vs on the CPU model.
add_executable(cuda_trainer_test ${CMAKE_CURRENT_LIST_DIR}/cuda_trainer_test.cc)
target_compile_options(cuda_trainer_test PRIVATE ${GRADSYNC_WARNINGS})
target_link_libraries(cuda_trainer_test PRIVATE gradsync_worker gradsync_cuda GTest::gtest_main)
gtest_discover_tests(cuda_trainer_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600)
