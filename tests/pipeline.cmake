# Batch inference jobs (src/pipeline, `toplu run` job mode, `toplu merge`).
#   pipeline_unit        cmocka tests of the modules (tests/test_pipeline.c)
#   pipeline_<case>      tests/test_pipeline.py: tiny models and files it makes at
#                        setup (sources, images, preprocessing, postprocessing,
#                        sinks, bad rows, job files, resume, shards, auto batch;
#                        regressions: clobbered inputs, merge checks, NaN
#                        inputs, CSV headers, resume identities, line numbers,
#                        messages and exit codes)
#                        and, labelled slow, real models: SIGKILL-and-resume over
#                        6,000 MNIST rows into every sink, 10,000 MNIST digits,
#                        photos through MobileNetV2 int8, PaddleOCR det on pages.
if(CMOCKA_FOUND)
  add_executable(test_pipeline ${CMAKE_CURRENT_SOURCE_DIR}/test_pipeline.c)
  target_link_libraries(test_pipeline PRIVATE toplu PkgConfig::CMOCKA)
  target_include_directories(test_pipeline PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(test_pipeline PRIVATE ${TOPLU_WARNINGS})
  add_test(NAME pipeline_unit COMMAND test_pipeline ${CMAKE_CURRENT_BINARY_DIR}/pipeline_unit)
endif()

if(TOPLU_PYTHON)
  execute_process(COMMAND ${TOPLU_PYTHON} -c "import onnx, numpy, PIL" RESULT_VARIABLE _pl_rc OUTPUT_QUIET ERROR_QUIET)
  if(_pl_rc EQUAL 0)
    set(_pl_dir ${CMAKE_CURRENT_BINARY_DIR}/pipeline)
    set(_pl_py ${CMAKE_CURRENT_SOURCE_DIR}/test_pipeline.py)
    add_test(NAME pipeline_setup COMMAND ${TOPLU_PYTHON} ${_pl_py} $<TARGET_FILE:toplu_cli> ${_pl_dir} setup)
    set_tests_properties(pipeline_setup PROPERTIES FIXTURES_SETUP pipeline_files)
    foreach(_case sources images preprocess postprocess bad_rows job_file resume shards auto_batch
                  clobber merge_checks nan_inputs csv_header resume_identity line_numbers messages npy_job
                  length_buckets npy_values rows_mix run_gaps image_sources memory_guard)
      add_test(NAME pipeline_${_case} COMMAND ${TOPLU_PYTHON} ${_pl_py} $<TARGET_FILE:toplu_cli> ${_pl_dir} ${_case})
      set_tests_properties(pipeline_${_case} PROPERTIES FIXTURES_REQUIRED pipeline_files SKIP_RETURN_CODE 77
                           TIMEOUT 600 LABELS pipeline)
    endforeach()
    foreach(_case crash mnist photos ocr_det cancel_mid_batch)
      add_test(NAME pipeline_${_case} COMMAND ${TOPLU_PYTHON} ${_pl_py} $<TARGET_FILE:toplu_cli> ${_pl_dir} ${_case})
      set_tests_properties(pipeline_${_case} PROPERTIES FIXTURES_REQUIRED pipeline_files SKIP_RETURN_CODE 77
                           TIMEOUT 1800 LABELS "pipeline;slow")
    endforeach()
  else()
    message(STATUS "onnx/numpy/PIL not found for ${TOPLU_PYTHON}: pipeline tests skipped")
  endif()
endif()
