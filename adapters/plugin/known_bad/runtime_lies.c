/* adapters/plugin/known_bad/runtime_lies.c: known-bad nxmem plugins that
 * load cleanly and then break one rule of the memory contract through the
 * ABI, the way a real allocator bug would.
 *
 * Each is an example plugin (BASE_VM: vm_host_plugin.c, else
 * eager_host_plugin.c) behind a forwarding wrapper: every vtable it opens is
 * copied into a wrapper whose slots call the honest ones, and exactly one
 * slot, chosen by LIE, bends the honest answer on its way out. One library
 * per lie; runtime_manifest.json lists each with the requirements the kit
 * must fail it on, exactly.
 */
#define NxmemCreateAllocatorFactories honest_create_factories
#if BASE_VM
#include "adapters/plugin/examples/vm_host_plugin.c"
#else
#include "adapters/plugin/examples/eager_host_plugin.c"
#endif
#undef NxmemCreateAllocatorFactories

#define LIE_RELEASE_OVERSTATES_BYTES 1
#define LIE_DECOMMIT_REPORTS_NOTHING_UNMAPPED 2
#define LIE_ESTIMATE_ONE_GRANULE_LOW 3
#define LIE_FOREIGN_PREFIX_COSTS_NOTHING 4
#define LIE_EVERY_MAPPING_CHARGED_AGAIN 5
#define LIE_LARGE_BLOCKS_HALF_SIZE 6

#ifndef LIE
#error "LIE must name the one rule this plugin breaks"
#endif

typedef struct Wrapped {
  NxmemAllocatorVtable allocator; /* what the kit sees; every ctx is this wrapper */
  NxmemVirtualBackingVtable virtual_backing;
  NxmemSharedMappingVtable shared_mapping;
  const NxmemAllocatorVtable* honest;
} Wrapped;

#define HONEST(ctx) (((Wrapped*)(ctx))->honest)
#define HONEST_VB(ctx) (HONEST(ctx)->virtual_backing)
#define HONEST_SM(ctx) (HONEST(ctx)->shared_mapping)

/* ---- the allocator's slots -------------------------------------------- */

static NxmemStatus w_allocate(void* ctx, const NxmemAllocRequest* request, NxmemAllocResult* result) {
  NxmemAllocRequest bent = *request;
#if LIE == LIE_LARGE_BLOCKS_HALF_SIZE
  if (bent.bytes >= 65536) bent.bytes /= 2; /* neighbours now overlap the tail */
#endif
  return HONEST(ctx)->allocate(HONEST(ctx)->ctx, &bent, result);
}

static NxmemStatus w_deallocate(void* ctx, const NxmemAllocation* allocation, uint64_t* unmapped_out) {
  NxmemAllocation bent = *allocation;
#if LIE == LIE_LARGE_BLOCKS_HALF_SIZE
  if (bent.bytes >= 65536) bent.bytes /= 2;
#endif
  return HONEST(ctx)->deallocate(HONEST(ctx)->ctx, &bent, unmapped_out);
}

static void w_retain(void* ctx) { HONEST(ctx)->retain(HONEST(ctx)->ctx); }

static void w_release(void* ctx) {
  const NxmemAllocatorVtable* honest = HONEST(ctx);
  honest->release(honest->ctx);
  free(ctx);
}

static NxmemStatus w_release_allocation(void* ctx, const NxmemAllocation* allocation, NxmemReleaseOutcome* outcome) {
  NxmemStatus answer = HONEST(ctx)->release_allocation(HONEST(ctx)->ctx, allocation, outcome);
#if LIE == LIE_RELEASE_OVERSTATES_BYTES
  if (answer.code == NXMEM_STATUS_OK && outcome->state == NXMEM_RELEASE_COMPLETE) outcome->allocation_bytes += 1;
#endif
  return answer;
}

#if BASE_VM
/* ---- virtual backing ---------------------------------------------------- */

static NxmemStatus w_allocate_committed(void* ctx, const NxmemAllocRequest* request, NxmemAllocResult* result) {
  return HONEST_VB(ctx)->allocate_committed(HONEST_VB(ctx)->ctx, request, result);
}
static NxmemStatus w_commit_range(void* ctx, const NxmemRangeRequest* request) {
  return HONEST_VB(ctx)->commit_range(HONEST_VB(ctx)->ctx, request);
}
static NxmemStatus w_decommit_range(void* ctx, const NxmemRangeRequest* request, uint64_t* unmapped_out) {
  NxmemStatus answer = HONEST_VB(ctx)->decommit_range(HONEST_VB(ctx)->ctx, request, unmapped_out);
#if LIE == LIE_DECOMMIT_REPORTS_NOTHING_UNMAPPED
  if (answer.code == NXMEM_STATUS_OK) *unmapped_out = 0;
#endif
  return answer;
}
static NxmemStatus w_mapped_bytes_for_ranges(void* ctx, const NxmemRangeRequest* requests, uint64_t count,
                                             uint64_t* mapped_out) {
  return HONEST_VB(ctx)->mapped_bytes_for_ranges(HONEST_VB(ctx)->ctx, requests, count, mapped_out);
}
static NxmemStatus w_mapped_bytes_for_allocation(void* ctx, const NxmemAllocRequest* request, uint64_t* mapped_out) {
  NxmemStatus answer = HONEST_VB(ctx)->mapped_bytes_for_allocation(HONEST_VB(ctx)->ctx, request, mapped_out);
#if LIE == LIE_ESTIMATE_ONE_GRANULE_LOW
  const uint64_t granule = (uint64_t)sysconf(_SC_PAGESIZE);
  if (answer.code == NXMEM_STATUS_OK && *mapped_out >= granule) *mapped_out -= granule;
#endif
  return answer;
}
static NxmemStatus w_committed_bytes(void* ctx, const NxmemAllocation* allocation, uint64_t* committed_out) {
  return HONEST_VB(ctx)->committed_bytes(HONEST_VB(ctx)->ctx, allocation, committed_out);
}

/* ---- shared mapping ----------------------------------------------------- */

static NxmemStatus w_create_shared_prefix(void* ctx, uint64_t mechanism_id, uint64_t bytes,
                                          NxmemSharedPrefixHandle* handle_out) {
  return HONEST_SM(ctx)->create_shared_prefix(HONEST_SM(ctx)->ctx, mechanism_id, bytes, handle_out);
}
static NxmemStatus w_retain_shared_prefix(void* ctx, const NxmemSharedPrefixHandle* handle) {
  return HONEST_SM(ctx)->retain_shared_prefix(HONEST_SM(ctx)->ctx, handle);
}
static NxmemStatus w_release_shared_prefix(void* ctx, const NxmemSharedPrefixHandle* handle) {
  return HONEST_SM(ctx)->release_shared_prefix(HONEST_SM(ctx)->ctx, handle);
}
static NxmemStatus w_incremental_owned_bytes(void* ctx, const NxmemSharedPrefixHandle* handle, uint64_t* bytes_out) {
  NxmemStatus answer = HONEST_SM(ctx)->incremental_owned_bytes(HONEST_SM(ctx)->ctx, handle, bytes_out);
#if LIE == LIE_FOREIGN_PREFIX_COSTS_NOTHING
  if (answer.code != NXMEM_STATUS_OK) {
    *bytes_out = 0;
    return example_ok();
  }
#endif
  return answer;
}
static NxmemStatus w_commit_shared_prefix(void* ctx, const NxmemSharedPrefixCommitRequest* request,
                                          NxmemSharedPrefixCommitInfo* info_out) {
  NxmemStatus answer = HONEST_SM(ctx)->commit_shared_prefix(HONEST_SM(ctx)->ctx, request, info_out);
#if LIE == LIE_EVERY_MAPPING_CHARGED_AGAIN
  if (answer.code == NXMEM_STATUS_OK) info_out->additional_owned_bytes = info_out->newly_mapped_bytes;
#endif
  return answer;
}

#endif

/* ---- the factory, wrapped ----------------------------------------------- */

static NxmemAllocatorFactoryVtable wrapped_factory;

static NxmemStatus wrapping_open(void* ctx, const NxmemOpenRequest* request, const NxmemAllocatorVtable** out) {
  const NxmemAllocatorFactoryVtable* const* honest_factory = ctx;
  const NxmemAllocatorVtable* honest = NULL;
  NxmemStatus answer = (*honest_factory)->open_allocator((*honest_factory)->ctx, request, &honest);
  if (answer.code != NXMEM_STATUS_OK) return answer;
  Wrapped* w = calloc(1, sizeof *w);
  if (w == NULL) {
    honest->release(honest->ctx);
    return example_status(NXMEM_STATUS_OUT_OF_MEMORY, "no memory for the wrapper");
  }
  w->honest = honest;
  w->allocator = *honest;
  w->allocator.ctx = w;
  w->allocator.allocate = w_allocate;
  w->allocator.deallocate = w_deallocate;
  w->allocator.retain = w_retain;
  w->allocator.release = w_release;
  if (honest->struct_size >= sizeof(NxmemAllocatorVtable) && honest->release_allocation != NULL) {
    w->allocator.release_allocation = w_release_allocation;
  }
#if BASE_VM
  if (honest->virtual_backing != NULL) {
    w->virtual_backing = *honest->virtual_backing;
    w->virtual_backing.ctx = w;
    w->virtual_backing.allocate_committed = w_allocate_committed;
    w->virtual_backing.commit_range = w_commit_range;
    w->virtual_backing.decommit_range = w_decommit_range;
    w->virtual_backing.mapped_bytes_for_ranges = w_mapped_bytes_for_ranges;
    w->virtual_backing.mapped_bytes_for_allocation = w_mapped_bytes_for_allocation;
    w->virtual_backing.committed_bytes = w_committed_bytes;
    w->allocator.virtual_backing = &w->virtual_backing;
  }
  if (honest->shared_mapping != NULL) {
    w->shared_mapping = *honest->shared_mapping;
    w->shared_mapping.ctx = w;
    w->shared_mapping.create_shared_prefix = w_create_shared_prefix;
    w->shared_mapping.retain_shared_prefix = w_retain_shared_prefix;
    w->shared_mapping.release_shared_prefix = w_release_shared_prefix;
    w->shared_mapping.incremental_owned_bytes = w_incremental_owned_bytes;
    w->shared_mapping.commit_shared_prefix = w_commit_shared_prefix;
    w->allocator.shared_mapping = &w->shared_mapping;
  }
#endif
  *out = &w->allocator;
  return answer;
}

/* The wrapped factory's ctx points here, at the honest factory. Its release
 * slot is the honest one, which ignores its ctx in both examples. */
static const NxmemAllocatorFactoryVtable* honest_factory_slot;

NxmemStatus NxmemCreateAllocatorFactories(const NxmemAllocatorFactoryVtable** out, uint64_t max, uint64_t* count) {
  NxmemStatus answer = honest_create_factories(out, max, count);
  if (answer.code != NXMEM_STATUS_OK || *count < 1) return answer;
  honest_factory_slot = out[0];
  wrapped_factory = *out[0];
  wrapped_factory.ctx = (void*)&honest_factory_slot;
  wrapped_factory.open_allocator = wrapping_open;
  out[0] = &wrapped_factory;
  return answer;
}
