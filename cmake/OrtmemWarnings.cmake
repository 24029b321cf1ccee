# Warnings every target of ours compiles with. Kept as an interface target so
# third-party headers (included as SYSTEM) stay quiet.
#
# ORTMEM_WARNINGS_AS_ERRORS is on in every preset (so CI and anyone building
# the project itself keeps the tree warning-free with g++ 12 and clang 14) and
# off by default, so a consumer building the kit with a newer compiler, or the
# mutation campaign's scratch builds (a mutant that only warns must still be
# judged by the tests), is not stopped by a warning that compiler adds.
option(ORTMEM_WARNINGS_AS_ERRORS "Compile the project's own targets with -Werror" OFF)
add_library(ortmem_warnings INTERFACE)
target_compile_options(ortmem_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
  -Wnon-virtual-dtor -Woverloaded-virtual -Werror=return-type
  # clang checks the locks' annotations (ortmem/detail/thread_annotations.hpp);
  # the asan and tsan presets build with clang, so CI does too.
  $<$<COMPILE_LANG_AND_ID:CXX,Clang>:-Wthread-safety>
  $<$<BOOL:${ORTMEM_WARNINGS_AS_ERRORS}>:-Werror>)
