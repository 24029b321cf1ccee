/* adapters/third_party/jemalloc_plugin.c: jemalloc (Debian's
 * libjemalloc-dev) as an nxmem plugin, through mallocx and sdallocx.
 *
 * Debian's shared libjemalloc replaces malloc for the whole process and
 * keeps its thread state in initial-exec TLS, which a library loaded with
 * dlopen may not get. So the plugin links jemalloc's PIC archive into itself
 * and exports only the three nxmem entry points (jemalloc_plugin.map): the
 * copy of jemalloc inside serves this plugin alone, under its unprefixed
 * names, without replacing the kit's malloc. The eager example is the
 * skeleton; this file only names the allocator. sdallocx hands jemalloc back
 * the size and alignment it was asked for. jemalloc cannot say what a free
 * gave back to the system, so releases go through deallocate at ABI minor 0.
 */
#define EAGER_BACKEND 1
#define NAME "jemalloc"
#define MECHANISM_ID 0x6a656d616c6c6f63ull /* "jemalloc" */

#include <jemalloc/jemalloc.h>

#define BACKEND_ALLOC(bytes, align) mallocx((size_t)(bytes), MALLOCX_ALIGN((size_t)(align)))
#define BACKEND_FREE(ptr, bytes, align) sdallocx((ptr), (size_t)(bytes), MALLOCX_ALIGN((size_t)(align)))

#include "plugin/examples/eager_host_plugin.c"
