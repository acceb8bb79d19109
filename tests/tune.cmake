# The batch-size tuner (src/tune/, `toplu tune`), tests/test_tune.py:
#   tune_tiny_*   quick: a tiny MLP made at test time (tune_setup): listed sizes,
#                 tune.json/tune.csv/plot, the memory limit (planned max fits, +10%
#                 is oom, binary search), bad settings, --profile and its trace
#   tune_cls, tune_models, tune_seed   slow (LABELS slow): PaddleOCR cls as in the
#                 acceptance check; resnet50, mobilenet_v2 and PaddleOCR det
#                 predicted vs measured peak bytes and planned vs found max batch;
#                 the resnet50 seed procedure (batch 1 .. 32)
#   tune_tiny_profiles  quick: shape profiles (--shape a=1x{64,4096} ...) on a tiny
#                 two-input model: sets paired, profiles.json and DIR/profile-K/tune.json,
#                 the batch that fits every profile, bad forms refused naming --shape
#   tune_rec_profiles   slow: PaddleOCR rec at widths 320, 640, 1280: bytes grow with the
#                 width, equal the planner's and a single --shape tune's
# Timing is compared only within one run's own measurements (the machine may be shared).
if(TOPLU_CLI_HAVE_ONNX)
  set(_tune_dir ${CMAKE_CURRENT_BINARY_DIR}/tune)
  set(_tune_py ${CMAKE_CURRENT_SOURCE_DIR}/test_tune.py)
  add_test(NAME tune_setup COMMAND ${TOPLU_PYTHON} ${_tune_py} $<TARGET_FILE:toplu_cli> ${_tune_dir} setup)
  set_tests_properties(tune_setup PROPERTIES FIXTURES_SETUP tune_models)
  # tune_tiny_inputs: an --input of the wrong shape named as --input (not --shape), a FIFO refused at once;
  # tune_tiny_max_batch: the sweep measures --max-batch itself; tune_tiny_openmp: tune, plan and run start
  # themselves again with GOMP_SPINCOUNT=3000 unless a wait policy is set (tools/cli.h cli_openmp_respawn)
  foreach(_case tiny_list tiny_limit tiny_bad tiny_profile tiny_fixed tiny_inputs tiny_max_batch tiny_openmp)
    add_test(NAME tune_${_case} COMMAND ${TOPLU_PYTHON} ${_tune_py} $<TARGET_FILE:toplu_cli> ${_tune_dir} ${_case})
    set_tests_properties(tune_${_case} PROPERTIES FIXTURES_REQUIRED tune_models TIMEOUT 300)
  endforeach()
  add_test(NAME tune_tiny_profiles COMMAND ${TOPLU_PYTHON} ${_tune_py} $<TARGET_FILE:toplu_cli> ${_tune_dir} tiny_profiles)
  set_tests_properties(tune_tiny_profiles PROPERTIES FIXTURES_REQUIRED tune_models TIMEOUT 300
                       LABELS "tune;profiles;quick")
  add_test(NAME tune_rec_profiles COMMAND ${TOPLU_PYTHON} ${_tune_py} $<TARGET_FILE:toplu_cli> ${_tune_dir} rec_profiles)
  set_tests_properties(tune_rec_profiles PROPERTIES FIXTURES_REQUIRED tune_models TIMEOUT 1800
                       LABELS "tune;profiles;slow")
  foreach(_case cls models seed)
    add_test(NAME tune_${_case} COMMAND ${TOPLU_PYTHON} ${_tune_py} $<TARGET_FILE:toplu_cli> ${_tune_dir} ${_case})
    set_tests_properties(tune_${_case} PROPERTIES FIXTURES_REQUIRED tune_models TIMEOUT 1800
                         LABELS slow)
  endforeach()
endif()

# tune_recommend: cmocka, the recommended batch size (toplu__tune_recommend) on
# hand-made rows whose answers are worked out by hand from tuner.h's rule.
add_executable(test_tune_recommend ${TOPLU_TEST_DIR}/test_tune_recommend.c)
target_include_directories(test_tune_recommend PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
target_compile_options(test_tune_recommend PRIVATE ${TOPLU_WARNINGS})
target_link_libraries(test_tune_recommend PRIVATE toplu PkgConfig::CMOCKA)
add_test(NAME tune_recommend COMMAND test_tune_recommend)
set_tests_properties(tune_recommend PROPERTIES TIMEOUT 60 LABELS "unit;quick")
