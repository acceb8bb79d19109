# Einsum (tests/test_einsum.py): two float32 inputs as batched GEMMs (ops/onednn/einsum.c) and the general loop
# (ops/linalg.c) on fifteen equations (attention scores, projections, broadcast "...", diagonal, outer product,
# scalar, implicit and transposed outputs, zero-size dims, three inputs, int32) against numpy's einsum, each on
# the kernel it should run on (the profile's impl).
set(_einsum_have_onnx OFF)
if(TOPLU_PYTHON)
  execute_process(COMMAND ${TOPLU_PYTHON} -c "import onnx, numpy" RESULT_VARIABLE _einsum_rc OUTPUT_QUIET ERROR_QUIET)
  if(_einsum_rc EQUAL 0)
    set(_einsum_have_onnx ON)
  endif()
endif()
if(_einsum_have_onnx)
  add_test(NAME einsum_cases COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_einsum.py $<TARGET_FILE:toplu_cli>
                                     ${CMAKE_CURRENT_BINARY_DIR}/einsum)
  set_tests_properties(einsum_cases PROPERTIES TIMEOUT 300 LABELS "quick" SKIP_RETURN_CODE 77)
endif()
