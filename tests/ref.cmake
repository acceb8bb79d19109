# The plain-C reference backend (src/ops/ref/): test_ref_kernels runs every
# reference kernel against the oneDNN-based kernel of the same op on random
# cases and against hand-worked values, then MNIST and resnet18 node by node
# on the reference kernels alone against a oneDNN session (resnet18 skipped
# when scripts/fetch-models.sh has not fetched it).
if(CMOCKA_FOUND)
  add_executable(test_ref_kernels ${TOPLU_TEST_DIR}/test_ref_kernels.c)
  target_include_directories(test_ref_kernels PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include
                             ${DNNL_INCLUDE_DIR})
  target_compile_options(test_ref_kernels PRIVATE ${TOPLU_WARNINGS})
  target_link_libraries(test_ref_kernels PRIVATE toplu PkgConfig::CMOCKA m)
  add_test(NAME ref_kernels COMMAND test_ref_kernels ${TOPLU_SHARED_DIR}/models/mnist/mnist.onnx)
  set_tests_properties(ref_kernels PROPERTIES TIMEOUT 600 LABELS "unit")
else()
  message(STATUS "cmocka not found: the `ref_kernels` test is not built")
endif()
