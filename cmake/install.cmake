# cmake/install.cmake - `cmake --install BUILD --prefix PREFIX` for programs that embed libtoplu
# (docs/library.md, "Installing and linking"):
#   PREFIX/bin/toplu                      the CLI
#   PREFIX/include/toplu/*.h              the public API
#   PREFIX/LIBDIR/libtoplu.a              static: one object whose only global definitions are the
#                                         public toplu_* names (the internals made local)
#   PREFIX/LIBDIR/libtoplu.so*            TOPLU_SHARED: exports the public toplu_* names only
#   PREFIX/LIBDIR/pkgconfig/toplu.pc      pkg-config toplu (shared) or --static (the libraries the
#                                         static one calls, as -l flags; in Libs without TOPLU_SHARED)
#   PREFIX/LIBDIR/cmake/toplu/            find_package(toplu): the imported target toplu::toplu
# LIBDIR is GNUInstallDirs' (lib, or lib/x86_64-linux-gnu under /usr on Debian).
include(GNUInstallDirs)

set(TOPLU_DIST ${CMAKE_BINARY_DIR}/dist)
file(MAKE_DIRECTORY ${TOPLU_DIST})

# The static library the build links its tools and tests with holds every internal name as a global
# symbol (pl_buf_free, srv_*, onnx__*...): a program defining one of its own would not link.  The
# installed one is the same objects linked into one relocatable object (ld -r) whose globals other
# than toplu_[a-z0-9]* are then made local (objcopy), so only the public API is visible.
add_custom_command(OUTPUT ${TOPLU_DIST}/libtoplu.a
  COMMAND ${CMAKE_COMMAND} -E remove -f ${TOPLU_DIST}/libtoplu.a ${TOPLU_DIST}/toplu.o
  COMMAND ${CMAKE_LINKER} -r -o ${TOPLU_DIST}/toplu.o --whole-archive $<TARGET_FILE:toplu>
  COMMAND ${CMAKE_OBJCOPY} --wildcard --keep-global-symbol=toplu_[a-z0-9]* ${TOPLU_DIST}/toplu.o
  COMMAND ${CMAKE_AR} rcs ${TOPLU_DIST}/libtoplu.a ${TOPLU_DIST}/toplu.o
  COMMAND ${CMAKE_COMMAND} -E remove -f ${TOPLU_DIST}/toplu.o
  DEPENDS toplu
  COMMENT "libtoplu.a for installing: the public toplu_* symbols only"
  VERBATIM)
add_custom_target(toplu_dist_static ALL DEPENDS ${TOPLU_DIST}/libtoplu.a)
install(FILES ${TOPLU_DIST}/libtoplu.a DESTINATION ${CMAKE_INSTALL_LIBDIR})

if(TOPLU_SHARED AND NOT TOPLU_FUZZ)
  if(CMAKE_VERSION VERSION_LESS 3.24)
    message(FATAL_ERROR "TOPLU_SHARED needs CMake 3.24 or later (LINK_LIBRARY:WHOLE_ARCHIVE); "
                        "configure with -DTOPLU_SHARED=OFF")
  endif()
  file(WRITE ${TOPLU_DIST}/toplu_so.c "/* libtoplu.so: libtoplu.a linked whole (cmake/install.cmake) */\n"
                                      "typedef int toplu__so_unit;\n")
  add_library(toplu_shared SHARED ${TOPLU_DIST}/toplu_so.c)
  target_link_libraries(toplu_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,toplu>")
  target_link_options(toplu_shared PRIVATE "LINKER:--version-script=${CMAKE_CURRENT_SOURCE_DIR}/cmake/toplu.map")
  if(NOT TOPLU_SANITIZE) # the sanitizer runtimes are linked into programs, not shared libraries
    target_link_options(toplu_shared PRIVATE "LINKER:--no-undefined")
  endif()
  set_target_properties(toplu_shared PROPERTIES OUTPUT_NAME toplu VERSION ${PROJECT_VERSION}
                        SOVERSION ${PROJECT_VERSION_MAJOR} LIBRARY_OUTPUT_DIRECTORY ${TOPLU_DIST}
                        LINK_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cmake/toplu.map)
  install(TARGETS toplu_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

install(TARGETS toplu_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/toplu DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

# pkg-config: paths relative to the .pc file, so an installed tree can be moved.
file(RELATIVE_PATH TOPLU_PC_REL_INCLUDE /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p/${CMAKE_INSTALL_INCLUDEDIR})
set(TOPLU_PC_OPENMP "")
foreach(_l ${OpenMP_C_LIB_NAMES})
  if(NOT _l STREQUAL "pthread")
    string(APPEND TOPLU_PC_OPENMP " -l${_l}")
  endif()
endforeach()
string(STRIP "${TOPLU_PC_OPENMP}" TOPLU_PC_OPENMP)
set(TOPLU_PC_DEPS "")
foreach(_l ${PROTOBUF_C_LIBRARIES} ${JANSSON_LIBRARIES} ${SQLITE3_LIBRARIES} ${LIBPNG_LIBRARIES} ${TURBOJPEG_LIBRARIES}
           ${MHD_LIBRARIES} ${CURL_LIBRARIES} ${ZLIB_LIBRARIES} ${XXHASH_LIBRARIES})
  string(APPEND TOPLU_PC_DEPS " -l${_l}")
endforeach()
string(STRIP "${TOPLU_PC_DEPS}" TOPLU_PC_DEPS)
set(_toplu_pc_all " ${TOPLU_PC_DEPS} -ldnnl ${TOPLU_PC_OPENMP} -lm -lpthread")
if(TOPLU_SHARED AND NOT TOPLU_FUZZ)
  set(TOPLU_PC_LIBS_EXTRA "")
  set(TOPLU_PC_LIBS_PRIVATE "${_toplu_pc_all}")
else()
  set(TOPLU_PC_LIBS_EXTRA "${_toplu_pc_all}")
  set(TOPLU_PC_LIBS_PRIVATE "")
endif()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/toplu.pc.in ${TOPLU_DIST}/toplu.pc @ONLY)
install(FILES ${TOPLU_DIST}/toplu.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

file(RELATIVE_PATH TOPLU_CM_REL_INCLUDE /p/${CMAKE_INSTALL_LIBDIR}/cmake/toplu /p/${CMAKE_INSTALL_INCLUDEDIR})
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/toplu-config.cmake.in ${TOPLU_DIST}/toplu-config.cmake @ONLY)
include(CMakePackageConfigHelpers)
write_basic_package_version_file(${TOPLU_DIST}/toplu-config-version.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${TOPLU_DIST}/toplu-config.cmake ${TOPLU_DIST}/toplu-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/toplu)
