/* adapters/third_party/glibc_plugin.c: the GNU C library's allocator as an
 * nxmem plugin, through posix_memalign and free.
 *
 * It is the process's own malloc, so nothing needs isolating: the plugin is
 * dlopened like any other. The eager example is the skeleton (the allocation
 * table, the identity checks, the exports); this file only names the
 * allocator. free cannot say what it gave back to the system, so releases
 * go through deallocate, reporting nothing unmapped, at ABI minor 0.
 */
#define EAGER_BACKEND 1
#define NAME "glibc"
#define MECHANISM_ID 0x676c696263ull /* "glibc" */

#include <stdlib.h>

static void* glibc_alloc(size_t bytes, size_t align) {
  void* ptr = NULL;
  return posix_memalign(&ptr, align, bytes) == 0 ? ptr : NULL;
}
#define BACKEND_ALLOC(bytes, align) glibc_alloc((size_t)(bytes), (size_t)(align))
#define BACKEND_FREE(ptr, bytes, align) free(ptr)

#include "plugin/examples/eager_host_plugin.c"
