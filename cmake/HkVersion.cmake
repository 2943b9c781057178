# The git SHA baked into `hk bench --json` (configure time; -dirty when the tree had changes).
# The GPU box gets a copy of the tree without .git: pass HK_GIT_SHA in the environment there.
if(DEFINED ENV{HK_GIT_SHA})
  set(HK_GIT_SHA "$ENV{HK_GIT_SHA}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/hk_version.hpp.in ${PROJECT_BINARY_DIR}/generated/hk_version.hpp @ONLY)
  return()
endif()
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                OUTPUT_VARIABLE HK_GIT_SHA OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0 OR HK_GIT_SHA STREQUAL "")
  set(HK_GIT_SHA "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                  OUTPUT_VARIABLE _dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT _dirty STREQUAL "")
    string(APPEND HK_GIT_SHA "-dirty")
  endif()
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/hk_version.hpp.in ${PROJECT_BINARY_DIR}/generated/hk_version.hpp @ONLY)
