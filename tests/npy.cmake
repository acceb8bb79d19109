# NPY files (src/core/npy.c): cmocka unit tests, and interoperability with
# numpy when /usr/bin/python3 has it (tests/npy_numpy.py):
#   npy_numpy_files       numpy writes files for every dtype, byte order, version
#   npy                   test_npy reads them, runs its own round trips and
#                         malformed-file checks, and writes files for numpy
#   npy_numpy_reads_toplu numpy.load reads toplu's files, byte for byte as numpy.save
if(CMOCKA_FOUND)
  add_executable(test_npy ${CMAKE_CURRENT_SOURCE_DIR}/test_npy.c)
  target_link_libraries(test_npy PRIVATE toplu PkgConfig::CMOCKA)
  target_compile_options(test_npy PRIVATE ${TOPLU_WARNINGS})

  set(TOPLU_NPY_HAVE_NUMPY OFF)
  if(TOPLU_PYTHON)
    execute_process(COMMAND ${TOPLU_PYTHON} -c "import numpy" RESULT_VARIABLE _npy_rc OUTPUT_QUIET ERROR_QUIET)
    if(_npy_rc EQUAL 0)
      set(TOPLU_NPY_HAVE_NUMPY ON)
    endif()
  endif()

  if(TOPLU_NPY_HAVE_NUMPY)
    set(_npy_dir ${CMAKE_CURRENT_BINARY_DIR}/npy)
    add_test(NAME npy_numpy_files
             COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/npy_numpy.py gen ${_npy_dir}/numpy)
    set_tests_properties(npy_numpy_files PROPERTIES FIXTURES_SETUP npy_numpy)
    add_test(NAME npy_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${_npy_dir}/toplu)
    set_tests_properties(npy_clean PROPERTIES FIXTURES_SETUP npy_numpy)
    add_test(NAME npy COMMAND test_npy ${_npy_dir}/numpy ${_npy_dir}/toplu)
    set_tests_properties(npy PROPERTIES FIXTURES_REQUIRED npy_numpy FIXTURES_SETUP npy_toplu)
    add_test(NAME npy_numpy_reads_toplu
             COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/npy_numpy.py check ${_npy_dir}/toplu)
    set_tests_properties(npy_numpy_reads_toplu PROPERTIES FIXTURES_REQUIRED "npy_toplu;npy_numpy")
  else()
    message(STATUS "numpy not found for ${TOPLU_PYTHON}: NPY interoperability tests skipped")
    add_test(NAME npy COMMAND test_npy)
  endif()
endif()
