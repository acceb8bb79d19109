# The engine side of the hardening issue (tests/test_hardening_engine.py):
# models an adversarial user could hand toplu, made at test time with
# /usr/bin/python3's onnx and numpy and run through this build's `toplu`
# (so the ASan+UBSan build tree runs them under the sanitizers too).
#   hardening_eng_fold_conv   constant-folded Conv/ConvTranspose against numpy
#   hardening_eng_extdata     external data: symlinks out of the folder, FIFOs,
#                             directories, 'w..bin', offsets past the end / 2^63-1
#   hardening_eng_model_file  /dev/zero and a FIFO as the model path
#   hardening_eng_overflow    shapes and attributes whose sizes overflow int64
#   hardening_eng_arch        transformer configs whose sizes overflow int64 (toplu plan --arch)
#   hardening_eng_sizes       the rest of the size review: Split, Range, LRN, zero-dim shapes
#                             (ConstantOfShape, initializers, inputs, .npy), Resize, Slice,
#                             external data at the model's folder (fuzz finding F2)
#   hardening_eng_reduce_axes_attr  ReduceSum-13 with an axes attribute refused
#   hardening_eng_bad_index   Gather's out-of-range index named by value and place
# cli.cmake sets TOPLU_CLI_HAVE_ONNX (fragments are included in name order).
if(TOPLU_CLI_HAVE_ONNX)
  foreach(_case fold_conv extdata model_file overflow arch sizes reduce_axes_attr bad_index)
    add_test(NAME hardening_eng_${_case}
             COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_hardening_engine.py
                     --toplu $<TARGET_FILE:toplu_cli> ${_case})
    set_tests_properties(hardening_eng_${_case} PROPERTIES TIMEOUT 300 LABELS "quick")
  endforeach()
else()
  message(STATUS "onnx/numpy not found for ${TOPLU_PYTHON}: hardening_eng_* tests not registered")
endif()
