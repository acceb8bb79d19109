# A request alone runs on the HTTP thread only for a model whose requests run briefly
# (tests/test_serve_inline.py): a liveness probe never waits behind a slow model's run.
if(TOPLU_PYTHON)
  add_test(NAME serve_inline_bound
           COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_inline.py $<TARGET_FILE:toplu_cli>
                   ${CMAKE_CURRENT_BINARY_DIR}/serve_inline)
  set_tests_properties(serve_inline_bound PROPERTIES LABELS "serve" TIMEOUT 300 RUN_SERIAL TRUE)
endif()
