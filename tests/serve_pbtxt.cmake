# Triton's config.pbtxt (protobuf text format) in the model repository, label "serve".
#   serve_pbtxt       src/serve/pbtxt.c, the converter to the JSON srv_config_parse reads
#                     (tests/test_serve_pbtxt.c, cmocka: Triton's example configs, repeated
#                     and map fields, literals, errors with line and column, bombs, prefixes)
#   serve_pbtxt_http  toplu serve over a repository of config.pbtxt models
#                     (tests/test_serve_pbtxt.py: max_batch_size and dynamic batching from
#                     the file, /config and the log naming it, both files refused, a bad file's
#                     line and column in the index; tiny generated Identity models)
if(EXISTS ${TOPLU_TEST_DIR}/test_serve_pbtxt.c)
  add_executable(test_serve_pbtxt ${TOPLU_TEST_DIR}/test_serve_pbtxt.c)
  target_include_directories(test_serve_pbtxt PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(test_serve_pbtxt PRIVATE toplu PkgConfig::CMOCKA PkgConfig::JANSSON pthread)
  target_compile_options(test_serve_pbtxt PRIVATE ${TOPLU_WARNINGS})
  add_test(NAME serve_pbtxt COMMAND test_serve_pbtxt)
  set_tests_properties(serve_pbtxt PROPERTIES LABELS "serve" TIMEOUT 120)
endif()
if(TOPLU_PYTHON AND EXISTS ${TOPLU_TEST_DIR}/test_serve_pbtxt.py)
  add_test(NAME serve_pbtxt_http
           COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_pbtxt.py $<TARGET_FILE:toplu_cli>
                   ${CMAKE_CURRENT_BINARY_DIR}/serve_pbtxt)
  set_tests_properties(serve_pbtxt_http PROPERTIES LABELS "serve" TIMEOUT 300 RUN_SERIAL TRUE)
endif()
