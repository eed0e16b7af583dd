# Run at build time (cmake -DSRC=<source dir> -DOUT=<file> -P build_info.cmake): writes the commit the source tree
# is at into OUT (src/cli/build_info.h declares it), rewriting the file only when the text changes, so a build
# recompiles it only after a commit. Without git or .git (a copied tree): $DG_GIT_SHA, else "unknown".
execute_process(COMMAND git -C "${SRC}" describe --always --dirty=-dirty --abbrev=12
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  if(DEFINED ENV{DG_GIT_SHA} AND NOT "$ENV{DG_GIT_SHA}" STREQUAL "")
    set(commit "$ENV{DG_GIT_SHA}")
  else()
    set(commit "unknown")
  endif()
endif()
set(text "// Generated at build time by cmake/build_info.cmake.\n#include \"cli/build_info.h\"\n\nconst char* const dg::cli::kBuildCommit = \"${commit}\";\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
