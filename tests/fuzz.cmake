# Fuzzing (fuzz/, docs/reliability.md): the fuzz targets' functions run on
# files through toplu-fuzz-replay, so these run in every build (Release,
# ASan+UBSan) without clang's fuzzer runtime:
#   fuzz_seeds_TARGET    each target over its committed seeds (fuzz/seeds/TARGET/):
#                        the targets themselves work, and the seeds stay valid inputs
#   fuzz_regress_TARGET  the regression inputs of fixed findings (tests/fuzz-regress/TARGET/*,
#                        registered when the folder has files); open findings wait in
#                        tests/fuzz-regress/TARGET/open/ and are not replayed until fixed
#   fuzz_mutate          the structure-aware model mutator (tests/test_fuzz_mutate.py)
set(_fz_targets model npy csv jsonl image jobfile serveconfig)
foreach(_t ${_fz_targets})
  add_test(NAME fuzz_seeds_${_t}
           COMMAND $<TARGET_FILE:toplu_fuzz_replay> ${_t} ${CMAKE_SOURCE_DIR}/fuzz/seeds/${_t})
  file(GLOB _fz_regress LIST_DIRECTORIES false CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-regress/${_t}/*)
  if(_fz_regress)
    add_test(NAME fuzz_regress_${_t}
             COMMAND $<TARGET_FILE:toplu_fuzz_replay> ${_t} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-regress/${_t})
    set_tests_properties(fuzz_regress_${_t} PROPERTIES LABELS fuzz ENVIRONMENT OMP_NUM_THREADS=1)
  endif()
  set_tests_properties(fuzz_seeds_${_t} PROPERTIES LABELS fuzz ENVIRONMENT OMP_NUM_THREADS=1)
endforeach()
set(_fz_py ${TOPLU_PYTHON})
if(NOT _fz_py)
  set(_fz_py /usr/bin/python3)
endif()
file(GLOB _fz_seed_models ${CMAKE_SOURCE_DIR}/fuzz/seeds/model/*.onnx)
add_test(NAME fuzz_mutate
         COMMAND ${_fz_py} ${CMAKE_CURRENT_SOURCE_DIR}/test_fuzz_mutate.py $<TARGET_FILE:toplu_mutate>
                 ${CMAKE_CURRENT_BINARY_DIR}/fuzz-mutate ${_fz_seed_models}
                 ${CMAKE_SOURCE_DIR}/fuzz/data/two_inputs.onnx)
set_tests_properties(fuzz_mutate PROPERTIES LABELS fuzz)
