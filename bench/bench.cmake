# bench/bench.cmake - the toplu side of the benchmark (bench/run.sh runs it
# beside bench/ort_bench.js; see bench/README.md).  Not a test.
add_executable(toplu_bench ${CMAKE_CURRENT_LIST_DIR}/toplu_bench.c)
set_target_properties(toplu_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
target_compile_options(toplu_bench PRIVATE ${TOPLU_WARNINGS})
target_link_libraries(toplu_bench PRIVATE toplu)

# bench/peak.c - the measured fp32 FMA peak (one core and all cores) as JSON.
add_executable(toplu_peak ${CMAKE_CURRENT_LIST_DIR}/peak.c)
set_target_properties(toplu_peak PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
target_compile_options(toplu_peak PRIVATE ${TOPLU_WARNINGS})
target_link_libraries(toplu_peak PRIVATE toplu)
