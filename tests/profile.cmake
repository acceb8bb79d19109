# The profiler (toplu/profile.h, `toplu run --profile`), tests/test_profile.py:
#   profile_mnist, profile_bad   quick: the trace of MNIST at batch 4 against the Trace Event
#                 Format, FLOPs counted from the ONNX file, the top steps; an unwritable trace
#   profile_resnet50  slow (LABELS slow): torchvision ResNet-50 at batch 2, Conv FLOPs also
#                 against the published 4.1 GMAC per image
# and tests/test_profile.c (cmocka): the FMA peak probe, toplu_profile_top and the writer on
# hand-made entries.
if(TOPLU_PYTHON)
  set(_prof_py ${CMAKE_CURRENT_SOURCE_DIR}/test_profile.py)
  set(_prof_args $<TARGET_FILE:toplu_cli> ${TOPLU_CACHE_DIR} ${TOPLU_SHARED_DIR} ${CMAKE_CURRENT_BINARY_DIR}/profile)
  foreach(_case mnist bad)
    add_test(NAME profile_${_case} COMMAND ${TOPLU_PYTHON} ${_prof_py} ${_prof_args} ${_case})
    set_tests_properties(profile_${_case} PROPERTIES TIMEOUT 300 LABELS "profile;quick")
  endforeach()
  add_test(NAME profile_resnet50 COMMAND ${TOPLU_PYTHON} ${_prof_py} ${_prof_args} resnet50)
  set_tests_properties(profile_resnet50 PROPERTIES TIMEOUT 900 LABELS "profile;slow")
endif()

add_executable(test_profile ${TOPLU_TEST_DIR}/test_profile.c)
target_include_directories(test_profile PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
target_compile_options(test_profile PRIVATE ${TOPLU_WARNINGS})
target_link_libraries(test_profile PRIVATE toplu PkgConfig::CMOCKA)
add_test(NAME profile_unit COMMAND test_profile)
set_tests_properties(profile_unit PROPERTIES TIMEOUT 120 LABELS "profile;unit;quick")
