# The backend seam on real models: the reference backend and mixed plans
# against the CPU backend and ONNX Runtime's fixtures (tests/test_backends.c).
add_executable(test_backends ${TOPLU_TEST_DIR}/test_backends.c)
target_link_libraries(test_backends PRIVATE toplu m)
set(_toplu_cache "$ENV{HOME}/.cache/toplu")
if(DEFINED ENV{TOPLU_CACHE})
  set(_toplu_cache "$ENV{TOPLU_CACHE}")
endif()
add_test(NAME backends_mnist COMMAND test_backends
  ${TOPLU_SHARED_DIR}/models/mnist/mnist.onnx
  ${TOPLU_SHARED_DIR}/fixtures/mnist/input_0.npy
  ${TOPLU_SHARED_DIR}/fixtures/mnist/output_0.npy 0
  reference reference:Conv reference:MaxPool+Relu+MatMul+Reshape)
set_tests_properties(backends_mnist PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "unit;quick")
add_test(NAME backends_resnet18 COMMAND test_backends
  ${_toplu_cache}/models/torchvision/resnet18.onnx
  ${_toplu_cache}/fixtures/resnet18/input_0.npy
  ${_toplu_cache}/fixtures/resnet18/output_0.npy 2
  reference reference:Conv reference:MaxPool+GlobalAveragePool+Gemm+Flatten+Add+Relu)
set_tests_properties(backends_resnet18 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 LABELS "slow")
