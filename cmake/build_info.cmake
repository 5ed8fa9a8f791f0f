# cmake -DSOURCE_DIR=... -DOUT=.../build_info.h -P build_info.cmake: the commit the executable is built from, for
# `flashcheck --version`. Run at every build; the header changes (and main.cc recompiles) only when the commit does.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD OUTPUT_VARIABLE commit
                OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0)
  set(commit "unknown (not a git checkout)")
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" diff --quiet HEAD -- RESULT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    string(APPEND commit " with local changes")
  endif()
endif()
file(WRITE "${OUT}.tmp" "#define FLASHCHECK_COMMIT \"${commit}\"\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
