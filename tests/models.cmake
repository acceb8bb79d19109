# Real-model tests (tests/models/*.py): toplu against ONNX Runtime 1.30 on real
# models and inputs.  They read the cache that scripts/fetch-models.sh fills
# (${TOPLU_CACHE:-$HOME/.cache/toplu}) and the shared folder (TOPLU_SHARED_DIR,
# tests/CMakeLists.txt), and FAIL with a message naming what is missing when
# those are incomplete: they never skip.  scripts/test.sh always fetches first.
# Labels: "model" for all; "quick" for the cheap ones,
# which the sanitizer build runs too; "slow" for the others, which it skips
# (scripts/test.sh runs `ctest -LE slow` in build-asan).
if(DEFINED ENV{TOPLU_CACHE} AND NOT "$ENV{TOPLU_CACHE}" STREQUAL "")
  set(_toplu_cache_default "$ENV{TOPLU_CACHE}")
else()
  set(_toplu_cache_default "$ENV{HOME}/.cache/toplu")
endif()
set(TOPLU_CACHE_DIR "${_toplu_cache_default}" CACHE PATH "Cache of real models and data (scripts/fetch-models.sh)")

if(TOPLU_PYTHON)
  set(_toplu_model_args --toplu $<TARGET_FILE:toplu_cli> --cache ${TOPLU_CACHE_DIR} --shared ${TOPLU_SHARED_DIR})

  # name -> labels: every fixture in ../shared/fixtures and the torchvision
  # fixtures that fetch-models.sh makes in the cache.
  set(_toplu_fixtures mnist ppocr_cls ppocr_det ppocr_rec ultraface_rfb320 mobilenet_v2_int8
                      resnet18 resnet50 mobilenet_v2)
  set(_toplu_quick_fixtures mnist ppocr_cls)
  foreach(fx ${_toplu_fixtures})
    add_test(NAME model_${fx}
             COMMAND ${TOPLU_PYTHON} ${TOPLU_TEST_DIR}/models/fixture_test.py ${_toplu_model_args} ${fx})
    set(_labels model slow)
    if(fx IN_LIST _toplu_quick_fixtures)
      set(_labels model quick)
    endif()
    set_tests_properties(model_${fx} PROPERTIES LABELS "${_labels}" TIMEOUT 1200)
  endforeach()

  add_test(NAME model_mnist_10000_digits
           COMMAND ${TOPLU_PYTHON} ${TOPLU_TEST_DIR}/models/mnist_test.py ${_toplu_model_args} --batch-size 64)
  set_tests_properties(model_mnist_10000_digits PROPERTIES LABELS "model;slow" TIMEOUT 1200)

  # PyTorch LSTM and GRU (2 layers, bidirectional, sequence-first, dynamic batch and
  # sequence) against ONNX Runtime at sequence 1, 17 and 100, batch 1 and 8, rows
  # run alone equal to their batched rows (tests/models/recurrent_test.py).
  foreach(_rnn lstm_bi2 gru_bi2)
    add_test(NAME model_${_rnn}
             COMMAND ${TOPLU_PYTHON} ${TOPLU_TEST_DIR}/models/recurrent_test.py ${_toplu_model_args} ${_rnn})
    set_tests_properties(model_${_rnn} PROPERTIES LABELS "model;quick" TIMEOUT 600)
  endforeach()

  # toplu quantize on MNIST with 500 real digits: accuracy over 10,000 and ONNX Runtime on the file
  add_test(NAME model_quantize_mnist
           COMMAND ${TOPLU_PYTHON} ${TOPLU_TEST_DIR}/models/quantize_test.py ${_toplu_model_args})
  set_tests_properties(model_quantize_mnist PROPERTIES LABELS "model;quick;int8" TIMEOUT 600)

  # toplu quantize on PaddleOCR det and UltraFace with real photos (image folders, --preprocess)
  add_test(NAME model_quantize_vision
           COMMAND ${TOPLU_PYTHON} ${TOPLU_TEST_DIR}/models/quantize_vision_test.py ${_toplu_model_args})
  set_tests_properties(model_quantize_vision PROPERTIES LABELS "model;slow;int8" TIMEOUT 900)

  add_test(NAME model_mobilenet_v2_int8_photos
           COMMAND ${TOPLU_PYTHON} ${TOPLU_TEST_DIR}/models/imagenet_int8_test.py ${_toplu_model_args})
  set_tests_properties(model_mobilenet_v2_int8_photos PROPERTIES LABELS "model;quick" TIMEOUT 600)

  # Silero VAD v5 (If on the sample rate, nested Ifs on shapes: graph/control.h), both files of the
  # npm package, streaming LibriVox speech window by window with the state carried, at 16 kHz (B=1 and
  # two streams as B=2) and 8 kHz, against ONNX Runtime (tests/models/silero_vad_test.py).
  add_test(NAME model_silero_vad
           COMMAND ${TOPLU_PYTHON} ${TOPLU_TEST_DIR}/models/silero_vad_test.py ${_toplu_model_args})
  set_tests_properties(model_silero_vad PROPERTIES LABELS "model;slow" TIMEOUT 900)
endif()

# The checks can fail: MNIST with toplu's batched outputs altered after reading
# (4x the fixture's tolerance on one value; the last column dropped) must fail exactly
# the checks that should catch it (fixture_test.py --perturb).
if(TOPLU_PYTHON)
  foreach(_how value column)
    add_test(NAME model_mnist_checks_catch_${_how}
             COMMAND ${TOPLU_PYTHON} ${TOPLU_TEST_DIR}/models/fixture_test.py ${_toplu_model_args} --perturb ${_how} mnist)
    set_tests_properties(model_mnist_checks_catch_${_how} PROPERTIES LABELS "model;quick" TIMEOUT 600)
  endforeach()
endif()
