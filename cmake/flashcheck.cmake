# Helpers shared by the folders' CMakeLists.

# Warnings for the project's own code (not for third-party headers, which come in as SYSTEM).
add_library(flashcheck_warnings INTERFACE)
target_compile_options(flashcheck_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers>)

# flashcheck_test(<name> SOURCES <files...> LIBS <targets...> [LABELS <labels...>])
# One GoogleTest executable; every TEST becomes a ctest test carrying the labels (default `unit`), so
# `ctest -L unit` and `--gtest_filter` both select.
function(flashcheck_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT FLASHCHECK_TESTS)
    return()
  endif()
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main flashcheck_warnings)
  gtest_discover_tests(${name}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    PROPERTIES LABELS "${ARG_LABELS}"
    DISCOVERY_MODE PRE_TEST)
endfunction()
