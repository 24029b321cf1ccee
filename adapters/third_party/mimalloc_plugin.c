/* adapters/third_party/mimalloc_plugin.c: mimalloc (Debian's libmimalloc)
 * as an nxmem plugin, through mi_malloc_aligned and mi_free_size_aligned.
 *
 * Debian builds libmimalloc to override malloc, but only for a process that
 * links it at startup: dlopened RTLD_LOCAL, as the kit loads every plugin,
 * it serves this plugin's explicit mi_ calls and nothing else, so the kit's
 * own heap stays glibc's and no block crosses from one to the other. The
 * eager example is the skeleton; this file only names the allocator. mimalloc
 * cannot say what a free gave back to the system, so releases go through
 * deallocate at ABI minor 0. The sized, aligned free hands mimalloc back
 * exactly what it was asked for, which its debug builds check.
 */
#define EAGER_BACKEND 1
#define NAME "mimalloc"
#define MECHANISM_ID 0x6d696d616c6c6f63ull /* "mimalloc" */

#include <mimalloc.h>

#define BACKEND_ALLOC(bytes, align) mi_malloc_aligned((size_t)(bytes), (size_t)(align))
#define BACKEND_FREE(ptr, bytes, align) mi_free_size_aligned((ptr), (size_t)(bytes), (size_t)(align))

#include "plugin/examples/eager_host_plugin.c"
