# A 1x1 convolution and the depthwise 3x3 convolution after it as one
# toplu.PointwiseDepthwiseConv step (tests/test_conv_dw.py): hand-built
# MobileNetV2 blocks (strides 1 and 2, Clip/Relu/none, with and without
# biases, odd sizes, batch 1 and 3, after another Conv) run as the plan
# picks, forced fused (oneDNN's depthwise post-op), forced as two primitives
# and unfused, against float64 numpy; graphs the rewrite must leave alone;
# torchvision MobileNetV2 against ONNX Runtime's output (the cache's
# fixtures/mobilenet_v2, made by scripts/fetch-models.sh).
if(TOPLU_PYTHON)
  execute_process(COMMAND ${TOPLU_PYTHON} -c "import onnx, numpy" RESULT_VARIABLE _cdw_rc OUTPUT_QUIET ERROR_QUIET)
  if(_cdw_rc EQUAL 0)
    add_test(NAME conv_dw_cases COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_conv_dw.py
                                        --toplu $<TARGET_FILE:toplu_cli> --cache ${TOPLU_CACHE_DIR})
    set_tests_properties(conv_dw_cases PROPERTIES TIMEOUT 900 LABELS "model;quick")
  endif()
endif()
