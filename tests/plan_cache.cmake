# The session's plan cache bounded by bytes and count (max_plan_bytes,
# max_plans) under a stream of 1,000 random sequence lengths, with the
# process's RSS under the bound the settings predict (tests/test_plan_cache.c).
# plan_cache_unbounded is its control: the same stream without the byte bound
# must go over those bounds (RSS; under ASan, which keeps freed memory in its
# quarantine, the cache's byte count), so the checks can fail.
# plan_cache_threads keeps oneDNN's primitive cache at its default size:
# with a small one (4 entries), oneDNN 2.6 gave wrong outputs, "primitive
# creation: runtime error" and std::bad_alloc aborts when threads made and
# dropped plans at once, with or without max_plan_bytes (docs/design.md,
# "Plan cache").
add_executable(test_plan_cache ${TOPLU_TEST_DIR}/test_plan_cache.c)
target_link_libraries(test_plan_cache PRIVATE toplu m)
target_compile_options(test_plan_cache PRIVATE ${TOPLU_WARNINGS})
add_test(NAME plan_cache COMMAND test_plan_cache stream)
set_tests_properties(plan_cache PROPERTIES TIMEOUT 600 LABELS "quick")
add_test(NAME plan_cache_threads COMMAND test_plan_cache threads)
set_tests_properties(plan_cache_threads PROPERTIES TIMEOUT 300 LABELS "quick")
if(TOPLU_SANITIZE)
  set(_plan_cache_control "FAIL run [0-9]+: the cache holds [0-9]+ bytes")
else()
  set(_plan_cache_control "FAIL RSS [0-9.]+ MiB is over the bound")
endif()
add_test(NAME plan_cache_unbounded COMMAND test_plan_cache unbounded)
set_tests_properties(plan_cache_unbounded PROPERTIES TIMEOUT 600 LABELS "quick"
                     PASS_REGULAR_EXPRESSION "${_plan_cache_control}")
