/* conformance/tests/plugins/two_mechanisms_plugin.c: a test fixture, not an
 * example: the eager example plugin offering its one mechanism under two
 * factories, the second named with characters a file name cannot hold as
 * they are ("eager twin/2"), so `run --report DIR/` is shown to write one
 * report per mechanism under a safe name. */
#define NxmemCreateAllocatorFactories eager_create_factories
#include "plugin/examples/eager_host_plugin.c"
#undef NxmemCreateAllocatorFactories

static NxmemAllocatorFactoryVtable twin;

NxmemStatus NxmemCreateAllocatorFactories(const NxmemAllocatorFactoryVtable** out, uint64_t max, uint64_t* count) {
  if (out == NULL || count == NULL)
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, "two-mechanisms: null argument");
  *count = 0;
  if (max < 2) return example_status(NXMEM_STATUS_SHORT_STRUCT, "two-mechanisms: no room for its two factories");
  twin = factory;
  twin.name = (const uint8_t*)"eager twin/2";
  out[0] = &factory;
  out[1] = &twin;
  *count = 2;
  atomic_fetch_add(&live_factories, 2);
  return example_ok();
}
