# The toplu command line (tools/): `toplu info` and `toplu run` on tiny ONNX
# models that tests/test_cli.py makes at test time with /usr/bin/python3's
# onnx and numpy.  cli_setup makes the models; each cli_<case> runs one group
# of checks (exit 77 = skipped, e.g. the MNIST case before Conv exists).
set(TOPLU_CLI_HAVE_ONNX OFF)
if(TOPLU_PYTHON)
  execute_process(COMMAND ${TOPLU_PYTHON} -c "import onnx, numpy" RESULT_VARIABLE _cli_rc OUTPUT_QUIET ERROR_QUIET)
  if(_cli_rc EQUAL 0)
    set(TOPLU_CLI_HAVE_ONNX ON)
  endif()
endif()

if(TOPLU_CLI_HAVE_ONNX)
  set(_cli_dir ${CMAKE_CURRENT_BINARY_DIR}/cli)
  set(_cli_py ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.py)
  add_test(NAME cli_setup COMMAND ${TOPLU_PYTHON} ${_cli_py} $<TARGET_FILE:toplu_cli> ${_cli_dir} setup)
  set_tests_properties(cli_setup PROPERTIES FIXTURES_SETUP cli_models)
  foreach(_case version info exit_codes run_single run_batched run_dtypes run_scalar run_fixed_batch run_errors run_whole run_nonfinite mnist)
    add_test(NAME cli_${_case} COMMAND ${TOPLU_PYTHON} ${_cli_py} $<TARGET_FILE:toplu_cli> ${_cli_dir} ${_case})
    set_tests_properties(cli_${_case} PROPERTIES FIXTURES_REQUIRED cli_models SKIP_RETURN_CODE 77 TIMEOUT 300)
  endforeach()
else()
  message(STATUS "onnx/numpy not found for ${TOPLU_PYTHON}: CLI tests skipped")
endif()

# Hand-built models numpy checks (tests/test_graph_cases.py): blocked binary
# broadcasts over padded channel blocks, fixed-batch models that use their size.
if(TOPLU_CLI_HAVE_ONNX)
  add_test(NAME graph_cases COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_graph_cases.py
                                    --toplu $<TARGET_FILE:toplu_cli>)
  set_tests_properties(graph_cases PROPERTIES TIMEOUT 300 LABELS "quick")
endif()

# TfIdfVectorizer on hand-built models against numpy (tests/test_text_cases.py): every mode,
# with and without weights, int32/int64, 1-D and 2-D X, skips, and the attribute errors.
if(TOPLU_CLI_HAVE_ONNX)
  add_test(NAME text_cases COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_text_cases.py
                               --toplu $<TARGET_FILE:toplu_cli>)
  set_tests_properties(text_cases PROPERTIES TIMEOUT 300 LABELS "quick")
endif()

# If, Loop and Scan on hand-built models numpy checks (tests/test_control_cases.py): plans keyed on
# a small input's value, branches chosen by shapes, unrolled loops and scans, and the errors naming
# node and tensor for control flow steered by tensor data.
if(TOPLU_CLI_HAVE_ONNX)
  add_test(NAME control_cases COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_control_cases.py
                                      --toplu $<TARGET_FILE:toplu_cli>)
  set_tests_properties(control_cases PROPERTIES TIMEOUT 300 LABELS "quick")
endif()

# A binary on a CPU that lacks what it was built for says so, never SIGILL (tests/test_cpu_check.py, QEMU's
# user-mode emulator as a Nehalem and a Zen 3).
if(TOPLU_PYTHON)
  if(TARGET toplu_shared)
    set(_toplu_cpu_lib ${CMAKE_C_COMPILER} $<TARGET_FILE:toplu_shared> ${TOPLU_SHARED_DIR}/fixtures/mnist)
  endif()
  add_test(NAME cli_cpu_check COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_check.py
                                      $<TARGET_FILE:toplu_cli> ${TOPLU_SHARED_DIR}/models/mnist/mnist.onnx
                                      ${_toplu_cpu_lib})
  set_tests_properties(cli_cpu_check PROPERTIES TIMEOUT 900 LABELS "slow")
endif()

# LSTM, GRU and RNN against a numpy reference of the spec's equations
# (tests/test_rnn_cases.py): every direction, layout, optional input and attribute.
if(TOPLU_CLI_HAVE_ONNX)
  add_test(NAME rnn_cases COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_rnn_cases.py
                                  --toplu $<TARGET_FILE:toplu_cli>)
  set_tests_properties(rnn_cases PROPERTIES TIMEOUT 600 LABELS "quick")
endif()

# Defects a tester found (tests/test_tester_cases.py), one test per case: Relu keeps NaN; a Conv's
# output shape for 0 rows; a bad TOPLU_CONV_DW refused; plan and tune under TOPLU_NO_FUSE.
if(TOPLU_CLI_HAVE_ONNX)
  foreach(_case relu_nan conv_empty_batch conv_dw_env no_fuse_plan_tune)
    add_test(NAME tester_${_case} COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_tester_cases.py
                                          --toplu $<TARGET_FILE:toplu_cli> ${_case})
    set_tests_properties(tester_${_case} PROPERTIES TIMEOUT 300 LABELS "quick")
  endforeach()
endif()
