# Fused scaled dot-product attention (tests/test_attention.py): hand-built
# attention graphs (scales, additive and bool masks of every broadcast shape,
# odd T, batch 1 and 3, 1 and 2 threads) fused against the unfused graph
# (TOPLU_NO_FUSE=attention) and numpy, and small PyTorch BERT-like and
# GPT-2-like exports fused layer by layer and against ONNX Runtime
# (scripts/ort-run.js).
# (Its own check of onnx and numpy: cli.cmake, which sets TOPLU_CLI_HAVE_ONNX,
# is included after this file.)
set(_attn_have_onnx OFF)
if(TOPLU_PYTHON)
  execute_process(COMMAND ${TOPLU_PYTHON} -c "import onnx, numpy" RESULT_VARIABLE _attn_rc OUTPUT_QUIET ERROR_QUIET)
  if(_attn_rc EQUAL 0)
    set(_attn_have_onnx ON)
  endif()
endif()
if(_attn_have_onnx)
  add_test(NAME attention_cases COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_attention.py
                                        --toplu $<TARGET_FILE:toplu_cli> --source-dir ${PROJECT_SOURCE_DIR})
  set_tests_properties(attention_cases PROPERTIES TIMEOUT 600 LABELS "quick" SKIP_RETURN_CODE 77)
endif()
