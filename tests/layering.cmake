# Layering and library manners (tests/check_layering.py): no file under src/
# includes a higher layer than its own (the order is the level column of
# docs/design.md's layer table), src/ prints nothing to stdout/stderr, and no
# message in src/ names a --flag or speaks as "toplu <cmd>: ".
#   layering            the check over src/ and tools/ (prints file:line: why)
#   layering_self_test  plants one offence of each kind in a scratch tree and
#                       checks the check finds exactly those
if(TOPLU_PYTHON)
  add_test(NAME layering COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/check_layering.py ${CMAKE_SOURCE_DIR})
  add_test(NAME layering_self_test COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/check_layering.py --self-test)
  set_tests_properties(layering layering_self_test PROPERTIES TIMEOUT 60 LABELS "quick")
else()
  message(STATUS "python3 not found: layering check skipped")
endif()
