/* adapters/third_party/tcmalloc_plugin.c: tcmalloc (Debian's gperftools,
 * libtcmalloc_minimal) as an nxmem plugin, through tc_memalign and tc_free
 * (not the sized free: memalign may have given a larger size class than was
 * asked, and a sized free names the class by the size).
 *
 * libtcmalloc_minimal replaces malloc for a process that links it at
 * startup; dlopened RTLD_LOCAL, as the kit loads every plugin, it serves
 * this plugin's explicit tc_ calls, and the kit's own heap stays glibc's.
 * The eager example is the skeleton; this file only names the allocator.
 * tcmalloc cannot say what a free gave back to the system, so releases go
 * through deallocate at ABI minor 0.
 */
#define EAGER_BACKEND 1
#define NAME "tcmalloc"
#define MECHANISM_ID 0x74636d616c6c6f63ull /* "tcmalloc" */

#include <gperftools/tcmalloc.h>

#define BACKEND_ALLOC(bytes, align) tc_memalign((size_t)(align), (size_t)(bytes))
#define BACKEND_FREE(ptr, bytes, align) tc_free(ptr)

#include "plugin/examples/eager_host_plugin.c"
