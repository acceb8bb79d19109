# The test harness itself:
#   test_run_check_self_test  tests/check_test_run.py --self-test: the check
#       scripts/test.sh runs after ctest (unregistered, unrun and skipped tests
#       fail the run) finds exactly the problems planted in made-up runs
add_test(NAME test_run_check_self_test COMMAND ${TOPLU_PYTHON} ${TOPLU_TEST_DIR}/check_test_run.py --self-test)
set_tests_properties(test_run_check_self_test PROPERTIES TIMEOUT 60 LABELS "quick")
