# Installing and embedding libtoplu (cmake/install.cmake, tests/test_install.py): `cmake --install`
# into a scratch prefix, then a separate C program (tests/install/consumer.c) built against the
# installed tree through pkg-config (libtoplu.so, and libtoplu.a with --static) and through
# find_package(toplu) (shared, and TOPLU_STATIC), each run on MNIST against ONNX Runtime's logits;
# the installed libraries export only the public toplu_* names (a program defining pl_buf_free
# links), and the public headers compile as C++.
if(TOPLU_PYTHON AND TARGET toplu_shared)
  add_test(NAME install_embed
           COMMAND ${TOPLU_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_install.py ${CMAKE_BINARY_DIR} ${CMAKE_COMMAND}
                   ${CMAKE_C_COMPILER} ${TOPLU_SHARED_DIR})
  # Under the sanitizers the installed libraries need the sanitizer runtimes in every consumer: the
  # packaging is checked on the Release build, the ASan+UBSan run (which leaves out "slow") skips it.
  if(TOPLU_SANITIZE)
    set(_toplu_install_label "slow")
  else()
    set(_toplu_install_label "quick")
  endif()
  set_tests_properties(install_embed PROPERTIES TIMEOUT 300 LABELS "${_toplu_install_label}")
endif()
