# Integer convolution (issue 9), tests/test_int8.py:
#   int8_qlinearconv  QLinearConv on oneDNN (constant parameters) and in plain C
#                     (parameters as inputs) against an exact integer reference
#   int8_qdq          QDQ Conv graphs fused into integer convolutions, their
#                     integer glue (Relu, Pad, per-channel Min) folded in, MaxPool
#                     on the integers, and
#                     a non-redundant Clip left float as ONNX Runtime leaves it
#                     (and run in int8 with qdq_int8_all, through toplu_bench)
#   int8_qdq_binary   QDQ Add and Mul as com.microsoft QLinearAdd/QLinearMul,
#                     bit-identical to the float nodes
#   int8_residual_fuse the residual Adds of a small PyTorch ResNet quantized by
#                     toplu quantize on photos, fused into the integer convolution
#                     before them, against TOPLU_NO_FUSE=qdq_residual; its stem's MaxPool
#                     quantized with its input's scale and zero point (test_int8_residual.py)
#   int8_qdq_float_out a QDQ Conv no QuantizeLinear follows: an integer
#                     convolution writing float (toplu's QLinearConvFloat),
#                     equal to the float Conv of the dequantized x and W
#   int8_qdq_layout   per-tensor QuantizeLinear/DequantizeLinear between a float
#                     and an integer convolution run on the convolutions' layout
#                     (no Reorder around them), equal to the plain kernels
#   int8_qdq_lookup   DequantizeLinear -> f -> QuantizeLinear (Sigmoid, HardSwish,
#                     LeakyRelu, GELU and SiLU written out, x * HardSigmoid(x), a
#                     HardSwish between scalar Mul/Add steps, the steps alone) as
#                     one toplu.QLinearLookup table step, equal to the unfused graph
#   int8_qdq_binary_layout  QLinearAdd / QLinearMul between two integer convolutions
#                     run on their uint8 layout (no Reorder around them), equal to
#                     the plain kernel bit for bit
if(TOPLU_PYTHON)
  foreach(_case qlinearconv qdq qdq_binary qdq_float_out qdq_layout qdq_lookup qdq_binary_layout)
    add_test(NAME int8_${_case}
             COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_int8.py $<TARGET_FILE:toplu_cli>
                     ${CMAKE_CURRENT_BINARY_DIR}/int8_${_case} ${_case} $<TARGET_FILE:toplu_bench>)
    set_tests_properties(int8_${_case} PROPERTIES TIMEOUT 300 LABELS "int8;quick")
  endforeach()
    add_test(NAME int8_residual_fuse
           COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_int8_residual.py $<TARGET_FILE:toplu_cli>
                   ${CMAKE_CURRENT_BINARY_DIR}/int8_residual_fuse)
  set_tests_properties(int8_residual_fuse PROPERTIES TIMEOUT 300 LABELS "int8;quick" SKIP_RETURN_CODE 77)
  # The same as a CPU without VNNI sees it (oneDNN capped at AVX2): QDQ Convs
  # stay float, QLinearConv runs in exact plain C (ops/kernel.h toplu__cpu_int8_exact)
  foreach(_case qlinearconv qdq qdq_float_out)
    add_test(NAME int8_${_case}_no_vnni
             COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_int8.py $<TARGET_FILE:toplu_cli>
                     ${CMAKE_CURRENT_BINARY_DIR}/int8_${_case}_no_vnni ${_case} $<TARGET_FILE:toplu_bench>)
    set_tests_properties(int8_${_case}_no_vnni PROPERTIES TIMEOUT 300 LABELS "int8;quick" ENVIRONMENT "DNNL_MAX_CPU_ISA=AVX2")
  endforeach()
endif()

# toplu quantize (issue 9), tests/test_quantize.py on a model built there:
#   quantize_minmax   folding, per-channel int8 weights, int32 biases, activation
#                     scales and zero points, the Clip cap, the report, all
#                     against numbers computed in the test; the result runs
#                     within 3% of float
#   quantize_methods  percentile and entropy ranges against minmax on data with outliers
#   quantize_options  --exclude, --op-types, --per-tensor, --symmetric-activations,
#                     --calibration-rows, the opset 9 -> 13 rewrite
#   quantize_errors   bad calls exit 2 naming the node, op, input or file
#   quantize_sources  .npy, CSV, JSONL calibration through the pipeline's reader give
#                     the same model; bad rows are left out with a warning
#   quantize_residual a Conv whose output a quantized residual Add reads is judged
#                     without its output's step (it stays int8)
#   quantize_plan     toplu plan --precision int8 on a float model plans the int8
#                     model toplu quantize writes (toplu_quantize_model, in memory)
#   quantize_paths    an existing output/report that is a FIFO, link or device is
#                     refused and kept; a user's OUT.part is never touched
#   quantize_cancel   SIGTERM/SIGINT while calibrating or writing: 143/130, no file left
#   quantize_zero     all-zero calibration refused; a zero-range tensor warned about
#   quantize_report   every candidate node in the report, quantized or why not;
#                     unnamed nodes as OPTYPE_INDEX (also for --exclude)
#   quantize_dead     dead output channels left out of the error estimate
#   quantize_flags    --dynamic refuses calibration flags; --op-types ''; summary wording
#   quantize_writefail a write error (file size limit) exits 1, nothing left
if(TOPLU_PYTHON)
  foreach(_case minmax methods options errors sources residual plan paths cancel zero report dead flags writefail shared)
    add_test(NAME quantize_${_case}
             COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_quantize.py $<TARGET_FILE:toplu_cli>
                     ${CMAKE_CURRENT_BINARY_DIR}/quantize_${_case} ${_case})
    set_tests_properties(quantize_${_case} PROPERTIES TIMEOUT 300 LABELS "int8;quick")
  endforeach()
endif()

# Integer MatMul (issue 9), tests/test_int8_matmul.py: oneDNN's integer matmul
# (ops/onednn/qmatmul.c) and the exact plain-C kernels (ops/quant_matmul.c,
# forced with DNNL_MAX_CPU_ISA=AVX2) against numpy references on random
# shapes (2-D, batch folded into M, batched 3-D, 4-D broadcast, 1-D):
#   int8_matmul_integer  MatMulInteger, zero points constant or run-time, bit for bit
#   int8_qlinear_matmul  QLinearMatMul, per-tensor and per-column b_scale
#   int8_dynamic_matmul  DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul [-> Add]
#                        fused into toplu.DynamicQuantizeMatMul, equal to the unfused graph
#   int8_qdq_matmul      QDQ MatMul/Gemm fused into toplu.QLinearMatMul (int8 or float out)
#                        against the float QDQ graph; left float without VNNI
#   int8_qlinear_matmul_bias  toplu.QLinearMatMul from a file: oneDNN and plain C, exact
if(TOPLU_PYTHON)
  foreach(_case matmul_integer qlinear_matmul dynamic qdq_matmul qlinear_matmul_bias)
    set(_name int8_${_case})
    if(_case STREQUAL "dynamic")
      set(_name int8_dynamic_matmul)
    endif()
    add_test(NAME ${_name}
             COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_int8_matmul.py $<TARGET_FILE:toplu_cli>
                     ${CMAKE_CURRENT_BINARY_DIR}/${_name} ${_case})
    set_tests_properties(${_name} PROPERTIES TIMEOUT 300 LABELS "int8;quick")
  endforeach()
endif()

# toplu quantize --dynamic (issue 9), tests/test_quantize_dynamic.py on an MLP
# and a 2-layer BERT-like encoder exported with torch:
#   quantize_dynamic_file      the written chains, int8 per-column weights and scales
#                              computed here, options and exit-2 errors
#   quantize_dynamic_accuracy  fused into toplu.DynamicQuantizeMatMul, close to float,
#                              and to ONNX Runtime on the same file (scripts/ort-run.js)
if(TOPLU_PYTHON)
  foreach(_case file accuracy)
    add_test(NAME quantize_dynamic_${_case}
             COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_quantize_dynamic.py $<TARGET_FILE:toplu_cli>
                     ${CMAKE_CURRENT_BINARY_DIR}/quantize_dynamic_${_case} ${_case} ${PROJECT_SOURCE_DIR})
    set_tests_properties(quantize_dynamic_${_case} PROPERTIES TIMEOUT 300 LABELS "int8;quick" SKIP_RETURN_CODE 77)
  endforeach()
endif()
