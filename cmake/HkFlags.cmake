# One flag set for all code (docs/design.md §7). Everything links hk_flags.
add_library(hk_flags INTERFACE)
target_compile_options(hk_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
  $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo --extended-lambda --expt-relaxed-constexpr
    -Xptxas=--warn-on-spills -Xptxas=--warn-on-local-memory-usage
    -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
if(HK_WERROR)
  target_compile_options(hk_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
endif()
