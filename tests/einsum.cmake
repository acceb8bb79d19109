# Einsum (tests/test_einsum.py): two float32 inputs as batched GEMMs (ops/onednn/einsum.c) and the general loop
# (ops/linalg.c) on fifteen equations (attention scores, projections, broadcast "...", diagonal, outer product,
# scalar, implicit and transposed outputs, zero-size dims, three inputs, int32) against numpy's einsum, each on
# the kernel it should run on (the profile's impl).  (cli.cmake, included before this file, checks for onnx and
# numpy: TOPLU_CLI_HAVE_ONNX.)
if(TOPLU_CLI_HAVE_ONNX)
  add_test(NAME einsum_cases COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_einsum.py $<TARGET_FILE:toplu_cli>
                                     ${CMAKE_CURRENT_BINARY_DIR}/einsum)
  set_tests_properties(einsum_cases PROPERTIES TIMEOUT 300 LABELS "quick" SKIP_RETURN_CODE 77)
endif()
