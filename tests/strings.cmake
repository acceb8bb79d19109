# String tensors (toplu/tensor.h: arrays of char *): Cast/CastLike to and from
# STRING, StringNormalizer, element moves, string outputs the caller frees.
# strings_models writes the models with /usr/bin/python3's onnx
# (tests/make_string_models.py); test_strings runs them (tests/test_strings.c).
add_executable(test_strings ${TOPLU_TEST_DIR}/test_strings.c)
target_include_directories(test_strings PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
target_compile_options(test_strings PRIVATE ${TOPLU_WARNINGS})
target_link_libraries(test_strings PRIVATE toplu PkgConfig::CMOCKA m)
set(_strings_dir ${CMAKE_CURRENT_BINARY_DIR}/strings)
add_test(NAME strings_models COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/make_string_models.py ${_strings_dir})
set_tests_properties(strings_models PROPERTIES FIXTURES_SETUP string_models TIMEOUT 120 LABELS "unit;quick")
add_test(NAME strings COMMAND test_strings ${_strings_dir})
set_tests_properties(strings PROPERTIES FIXTURES_REQUIRED string_models TIMEOUT 120 LABELS "unit;quick")
