# Element-wise ops: broadcasting fast paths (src/ops/broadcast.c) and the
# typed loops (src/ops/elementwise_*.c) against naive references.
if(CMOCKA_FOUND)
  add_executable(test_broadcast ${TOPLU_TEST_DIR}/test_broadcast.c)
  target_include_directories(test_broadcast PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
  target_compile_options(test_broadcast PRIVATE ${TOPLU_WARNINGS})
  target_link_libraries(test_broadcast PRIVATE toplu PkgConfig::CMOCKA m)
  add_test(NAME broadcast COMMAND test_broadcast)
  set_tests_properties(broadcast PROPERTIES TIMEOUT 120 LABELS "unit")
else()
  message(STATUS "cmocka not found: the `broadcast` test is not built")
endif()

# NaN and large values through toplu's own max/min, pooling, LogSoftmax and Celu kernels against numpy
# (tests/test_nan_semantics.py, one-node models through toplu run).
add_test(NAME nan_semantics COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_nan_semantics.py
         $<TARGET_FILE:toplu_cli> ${CMAKE_CURRENT_BINARY_DIR}/nan_semantics)
set_tests_properties(nan_semantics PROPERTIES TIMEOUT 300 LABELS quick)
