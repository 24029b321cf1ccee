# Warnings every target of ours compiles with. Kept as an interface target so
# third-party headers (included as SYSTEM) stay quiet.
add_library(ortmem_warnings INTERFACE)
target_compile_options(ortmem_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
  -Wnon-virtual-dtor -Woverloaded-virtual -Werror=return-type)
