# Hardening of batch jobs (issue 14, pipeline and CLI side): tests/test_pipeline_hardening.py
# reproduces each defect found by adversarial use (absurd batch sizes, NaN into integer
# inputs, concurrent writers, decompression bombs, outputs that would destroy a user's files,
# outputs cut short after a checkpoint, ids that need escaping, unbounded reads, CSV dialects,
# results into a table of their own inside a user's database)
# on tiny models it makes at setup, and checks the fix.
if(TOPLU_PYTHON)
  execute_process(COMMAND ${TOPLU_PYTHON} -c "import onnx, numpy, PIL" RESULT_VARIABLE _plh_rc OUTPUT_QUIET ERROR_QUIET)
  if(_plh_rc EQUAL 0)
    set(_plh_dir ${CMAKE_CURRENT_BINARY_DIR}/pipeline_hardening)
    set(_plh_py ${CMAKE_CURRENT_SOURCE_DIR}/test_pipeline_hardening.py)
    add_test(NAME pipeline_hardening_setup COMMAND ${TOPLU_PYTHON} ${_plh_py} $<TARGET_FILE:toplu_cli> ${_plh_dir} setup)
    set_tests_properties(pipeline_hardening_setup PROPERTIES FIXTURES_SETUP pipeline_hardening_files)
    foreach(_case batch_bound int_inputs overwrite two_writers verify_outputs image_bomb flag_paths csv_dialects unbounded_reads ids_escaped interrupted_rename merge_overwrite sqlite_table fresh_user shards_merge operator buckets_text postprocess_outputs)
      add_test(NAME pipeline_hardening_${_case}
               COMMAND ${TOPLU_PYTHON} ${_plh_py} $<TARGET_FILE:toplu_cli> ${_plh_dir} ${_case})
      set_tests_properties(pipeline_hardening_${_case} PROPERTIES FIXTURES_REQUIRED pipeline_hardening_files
                           TIMEOUT 600 LABELS pipeline)
    endforeach()
  else()
    message(STATUS "onnx/numpy/PIL not found for ${TOPLU_PYTHON}: pipeline hardening tests not registered")
  endif()
endif()
