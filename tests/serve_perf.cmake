# toplu perf (src/serve/perf*.c, tools/cmd_perf.c) against a stub KServe v2
# server in Python (tests/test_perf.py): closed and open loop throughput, the
# CSV, errors by status and timeouts, server times from /metrics, input data and tensor
# formats, usage errors and exit codes, the PNG plot, a server that dies mid-run (backoff,
# exit 1, the CSV's Errors column).  One ctest per case.
if(TOPLU_PYTHON)
  foreach(_case closed rate errors timeouts usage data plot wire dead)
    add_test(NAME serve_perf_${_case}
             COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_perf.py $<TARGET_FILE:toplu_cli> ${_case})
    set_tests_properties(serve_perf_${_case} PROPERTIES LABELS "serve" TIMEOUT 300)
  endforeach()
endif()
