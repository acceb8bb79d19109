# A Triton repository moved to toplu serve (tests/test_serve_triton.py): default_model_filename,
# model_warmup count 0, parameters shown, missing specific versions logged, an empty repository,
# tritonserver's boolean flag forms, the shared-memory extension refused by name.
if(TOPLU_PYTHON)
  add_test(NAME serve_triton_migration
           COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_triton.py $<TARGET_FILE:toplu_cli>
                   ${CMAKE_CURRENT_BINARY_DIR}/serve_triton)
  set_tests_properties(serve_triton_migration PROPERTIES LABELS "serve" TIMEOUT 300 RUN_SERIAL TRUE)
endif()
