# toplu's own GEMM (src/ops/onednn/gemm_avx2.c: shapes, post-ops, the same
# bits from 1 and 2 threads) and the vector GELU
# (src/ops/fastmath.c) against references: tests/test_gemm.c.
if(CMOCKA_FOUND)
  add_executable(test_gemm ${TOPLU_TEST_DIR}/test_gemm.c)
  target_include_directories(test_gemm PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
  target_compile_options(test_gemm PRIVATE ${TOPLU_WARNINGS})
  target_link_libraries(test_gemm PRIVATE toplu PkgConfig::CMOCKA m)
  add_test(NAME gemm_own COMMAND test_gemm)
  set_tests_properties(gemm_own PROPERTIES TIMEOUT 300 LABELS "unit")
else()
  message(STATUS "cmocka not found: the `gemm_own` test is not built")
endif()
