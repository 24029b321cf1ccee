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
 *
 * Deferred release is bent on the way back: the honest plugin is opened
 * with a callback table of the wrapper's (its host_ctx is the wrapper),
 * whose release_completed bends a completion, or withholds, repeats or
 * forges one, and then forwards to the host's own table. The honest worker
 * thread calls it concurrently with the host's threads, so what it keeps is
 * under a mutex that is never held across a call into the host.
 */
#define NxmemCreateAllocatorFactories honest_create_factories
#define OrtmemCtsPluginControls honest_controls
#if BASE_VM
#include "plugin/examples/vm_host_plugin.c"
#else
#include "plugin/examples/eager_host_plugin.c"
#endif
#undef NxmemCreateAllocatorFactories
#undef OrtmemCtsPluginControls

#define LIE_RELEASE_OVERSTATES_BYTES 1
#define LIE_DECOMMIT_REPORTS_NOTHING_UNMAPPED 2
#define LIE_ESTIMATE_ONE_GRANULE_LOW 3
#define LIE_FOREIGN_PREFIX_COSTS_NOTHING 4
#define LIE_EVERY_MAPPING_CHARGED_AGAIN 5
#define LIE_LARGE_BLOCKS_HALF_SIZE 6
#define LIE_COMPLETION_DELIVERED_TWICE 7
#define LIE_COMPLETION_OUT_OF_ORDER 8
#define LIE_COMPLETION_NAMES_WRONG_TICKET 9
#define LIE_COMPLETION_FOR_NEVER_ENQUEUED_ALLOCATION 10
#define LIE_TICKET_NEVER_COMPLETES 11
#define LIE_COMPLETION_OVERSTATES_BYTES 12
/* Lies told through the kit's control extension (ortmem_cts_controls.h),
 * which the wrapper forwards like any vtable. */
#define LIE_FENCES_IGNORED 13
#define LIE_CLOSE_IGNORED 14
#define LIE_CAPACITY_IGNORED 15
#define LIE_DEVICE_LOSS_FREES 16
#define LIE_LOST_REFUSED_AS_FULL 17
#define LIE_DECOMMIT_FAULT_NEVER_FIRES 18
#define LIE_PARTIAL_RELEASE_REPORTED_COMPLETE 19

#include <pthread.h>
#include <stdatomic.h>

#ifndef LIE
#error "LIE must name the one rule this plugin breaks"
#endif

typedef struct Wrapped {
  NxmemAllocatorVtable allocator; /* what the kit sees; every ctx is this wrapper */
  NxmemVirtualBackingVtable virtual_backing;
  NxmemSharedMappingVtable shared_mapping;
  const NxmemAllocatorVtable* honest;
  /* Set at open, before the honest plugin can call either, and never
   * written again: `relay` is the table the honest plugin was given (its
   * host_ctx is this wrapper), `host` a copy of the host's own. */
  NxmemHostCallbacks relay;
  NxmemHostCallbacks host;
  pthread_mutex_t mutex; /* guards what follows; never held across a call out */
  uint64_t relayed;      /* completions the honest plugin has delivered */
  /* A completion the lie owes the host: LIE_COMPLETION_OUT_OF_ORDER's
   * withheld one, or the extra that LIE_COMPLETION_DELIVERED_TWICE and
   * LIE_COMPLETION_FOR_NEVER_ENQUEUED_ALLOCATION send. */
  int has_spare;
  NxmemReleaseCompletion spare;
  uint64_t forged; /* completions made up so far */
  /* One per release the host owes (the open, and each retain) and one per
   * ticket the honest plugin has yet to complete: its worker may deliver a
   * completion as the host drops the allocator, and the wrapper is that
   * completion's host_ctx. */
  atomic_uint_fast64_t references;
} Wrapped;

#define HONEST(ctx) (((Wrapped*)(ctx))->honest)
#define HONEST_VB(ctx) (HONEST(ctx)->virtual_backing)
#define HONEST_SM(ctx) (HONEST(ctx)->shared_mapping)

static void drop(Wrapped* w) {
  if (atomic_fetch_sub(&w->references, 1) != 1) return;
  pthread_mutex_destroy(&w->mutex);
  free(w);
}

/* ---- the host's callbacks, relayed -------------------------------------- */

static NxmemStatus to_host(Wrapped* w, const NxmemReleaseCompletion* completion) {
  return w->host.release_completed(w->host.host_ctx, completion);
}

/* The host may drop the allocator, and with it the callback table, as soon
 * as its last ticket has completed, even from inside that completion. So a
 * completion the lie adds is never sent after the real one it follows: it
 * waits for the next real one (whose ticket keeps the table valid), for the
 * next drain_releases or for the final release (which the host makes with
 * the table still valid), and goes out first. A withheld completion keeps
 * the table valid by itself: its ticket is still outstanding. */
static int take_spare(Wrapped* w, NxmemReleaseCompletion* out) { /* caller holds the mutex */
  const int had = w->has_spare;
  if (had) *out = w->spare;
  w->has_spare = 0;
  return had;
}

/* Sends what the lie still owes, late but never lost; called inside a
 * call from the host, which keeps the callback table valid. */
static void deliver_spare(Wrapped* w) {
  NxmemReleaseCompletion spare;
  memset(&spare, 0, sizeof spare);
  pthread_mutex_lock(&w->mutex);
  const int had = take_spare(w, &spare);
  pthread_mutex_unlock(&w->mutex);
  if (had) (void)to_host(w, &spare);
}

static NxmemStatus relay_release_completed(void* host_ctx, const NxmemReleaseCompletion* completion) {
  Wrapped* w = host_ctx;
  NxmemReleaseCompletion bent = *completion;
  NxmemReleaseCompletion spare;
  memset(&spare, 0, sizeof spare);
  pthread_mutex_lock(&w->mutex);
  const uint64_t nth = ++w->relayed;
#if LIE == LIE_COMPLETION_OUT_OF_ORDER
  /* The second of every four is withheld until the next one has gone. */
  const int overtaken = take_spare(w, &spare);
  const int withhold = !overtaken && nth % 4 == 2;
  if (withhold) {
    w->spare = bent;
    w->has_spare = 1;
  }
#else
  const int extra = take_spare(w, &spare);
#endif
  pthread_mutex_unlock(&w->mutex);
  (void)nth;

  NxmemStatus answer = example_ok();
#if LIE == LIE_COMPLETION_OUT_OF_ORDER
  if (!withhold) answer = to_host(w, &bent);
  if (overtaken) (void)to_host(w, &spare);
#else
  if (extra) (void)to_host(w, &spare); /* the previous one's extra, sent while this ticket is outstanding */
#if LIE == LIE_COMPLETION_NAMES_WRONG_TICKET
  bent.ticket += 1000;
#elif LIE == LIE_COMPLETION_OVERSTATES_BYTES
  if (bent.outcome.state == NXMEM_RELEASE_COMPLETE) bent.outcome.allocation_bytes += 1;
#endif
#if LIE == LIE_TICKET_NEVER_COMPLETES
  /* Every fifth is swallowed; the honest plugin counts it retired all the same. */
  if (nth % 5 != 0) answer = to_host(w, &bent);
#else
  answer = to_host(w, &bent);
#endif
#if LIE == LIE_COMPLETION_DELIVERED_TWICE || LIE == LIE_COMPLETION_FOR_NEVER_ENQUEUED_ALLOCATION
  pthread_mutex_lock(&w->mutex);
  w->spare = bent;                                   /* this one again */
#if LIE == LIE_COMPLETION_FOR_NEVER_ENQUEUED_ALLOCATION
  w->spare.allocation_id = UINT64_MAX - w->forged++; /* the host counts ids up from 1 */
#endif
  w->has_spare = 1;
  pthread_mutex_unlock(&w->mutex);
#endif
#endif
  drop(w); /* this ticket's */
  return answer;
}

static NxmemStatus relay_request_reclaim(void* host_ctx, const NxmemReclaimRequest* request, uint64_t* reclaimed_out) {
  Wrapped* w = host_ctx;
  return w->host.request_reclaim(w->host.host_ctx, request, reclaimed_out);
}

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

static void w_retain(void* ctx) {
  atomic_fetch_add(&((Wrapped*)ctx)->references, 1);
  HONEST(ctx)->retain(HONEST(ctx)->ctx);
}

static void w_release(void* ctx) {
  const NxmemAllocatorVtable* honest = HONEST(ctx);
  honest->release(honest->ctx); /* the final one delivers every ticket still queued */
  deliver_spare(ctx);           /* nothing owed is left once the host is told all is done */
  drop(ctx);
}

static NxmemStatus w_release_allocation(void* ctx, const NxmemAllocation* allocation, NxmemReleaseOutcome* outcome) {
  NxmemStatus answer = HONEST(ctx)->release_allocation(HONEST(ctx)->ctx, allocation, outcome);
#if LIE == LIE_RELEASE_OVERSTATES_BYTES
  if (answer.code == NXMEM_STATUS_OK && outcome->state == NXMEM_RELEASE_COMPLETE) outcome->allocation_bytes += 1;
#elif LIE == LIE_PARTIAL_RELEASE_REPORTED_COMPLETE
  /* An unmap failed part way: the plugin says it all went. */
  if (answer.code == NXMEM_STATUS_OK && outcome->state == NXMEM_RELEASE_QUARANTINED) {
    outcome->state = NXMEM_RELEASE_COMPLETE;
    outcome->unmapped_bytes += outcome->residual_owned_bytes;
    outcome->residual_owned_bytes = 0;
    memset(&outcome->failure, 0, sizeof outcome->failure);
  }
#endif
  return answer;
}

/* Deferred release passes straight through to the honest plugin, which
 * completes into the relay above. */
static NxmemStatus w_enqueue_release(void* ctx, const NxmemAllocation* allocation, uint64_t* ticket_out) {
  if (allocation == NULL) return HONEST(ctx)->enqueue_release(HONEST(ctx)->ctx, allocation, ticket_out);
  NxmemAllocation bent = *allocation;
#if LIE == LIE_LARGE_BLOCKS_HALF_SIZE
  if (bent.bytes >= 65536) bent.bytes /= 2;
#endif
  /* Taken before the call: the completion may come inside it. */
  atomic_fetch_add(&((Wrapped*)ctx)->references, 1);
  NxmemStatus answer = HONEST(ctx)->enqueue_release(HONEST(ctx)->ctx, &bent, ticket_out);
  if (answer.code != NXMEM_STATUS_OK) drop(ctx); /* nothing was queued */
#if LIE == LIE_LOST_REFUSED_AS_FULL
  if (answer.code == NXMEM_STATUS_DEVICE_ERROR) answer = example_status(NXMEM_STATUS_BUSY, "the queue is full");
#endif
  return answer;
}
static NxmemStatus w_drain_releases(void* ctx, uint64_t max, uint64_t* retired_out) {
  const NxmemStatus answer = HONEST(ctx)->drain_releases(HONEST(ctx)->ctx, max, retired_out);
  deliver_spare(ctx); /* what the lie owes goes out before the drain returns */
  return answer;
}
static NxmemStatus w_pending_release_count(void* ctx, uint64_t* count_out) {
  const NxmemStatus answer = HONEST(ctx)->pending_release_count(HONEST(ctx)->ctx, count_out);
#if LIE == LIE_COMPLETION_OUT_OF_ORDER
  if (answer.code == NXMEM_STATUS_OK && count_out != NULL) {
    Wrapped* w = ctx;
    pthread_mutex_lock(&w->mutex);
    *count_out += (uint64_t)w->has_spare; /* withheld is still pending: the lie is the order alone */
    pthread_mutex_unlock(&w->mutex);
  }
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

/* ---- the control extension ---------------------------------------------- */
#if BASE_VM

/* The honest table, read once the kit asks for it; the wrapper's slots get
 * the wrapper as ctx and hand the honest allocator's ctx on. */
static const OrtmemCtsControls* honest_table;
static OrtmemCtsControls wrapped_controls;

static NxmemStatus w_open_queue(void* ctx, uint64_t capacity) {
#if LIE == LIE_CAPACITY_IGNORED
  capacity = 0; /* unbounded, whatever the kit asked */
#endif
  return honest_table->open_queue(HONEST(ctx)->ctx, capacity);
}
static NxmemStatus w_record_use(void* ctx) {
#if LIE == LIE_FENCES_IGNORED
  (void)ctx;
  return example_ok(); /* no fence: queued releases run at once */
#else
  return honest_table->record_use(HONEST(ctx)->ctx);
#endif
}
static NxmemStatus w_signal_fences(void* ctx) { return honest_table->signal_fences(HONEST(ctx)->ctx); }
static NxmemStatus w_close_queue(void* ctx) {
#if LIE == LIE_CLOSE_IGNORED
  (void)ctx;
  return example_ok(); /* closed, it says, and goes on taking work */
#else
  return honest_table->close_queue(HONEST(ctx)->ctx);
#endif
}
static NxmemStatus w_lose_device(void* ctx) {
#if LIE == LIE_DEVICE_LOSS_FREES
  /* Frees what was pending, as though the device were still there, and only
   * then takes the loss: nothing is left for it to quarantine. */
  uint64_t retired = 0;
  (void)honest_table->signal_fences(HONEST(ctx)->ctx);
  (void)w_drain_releases(ctx, UINT64_MAX, &retired);
#endif
  return honest_table->lose_device(HONEST(ctx)->ctx);
}
static NxmemStatus w_arm_fault(void* ctx, uint32_t point, uint64_t nth) {
#if LIE == LIE_DECOMMIT_FAULT_NEVER_FIRES
  if (point == ORTMEM_CTS_FAULT_DECOMMIT) return example_ok(); /* armed, it says */
#endif
  return honest_table->arm_fault(HONEST(ctx)->ctx, point, nth);
}
static NxmemStatus w_clear_faults(void* ctx) { return honest_table->clear_faults(HONEST(ctx)->ctx); }

NxmemStatus OrtmemCtsPluginControls(uint32_t kit_version, uint64_t mechanism_id, const OrtmemCtsControls** out) {
  const OrtmemCtsControls* honest = NULL;
  const NxmemStatus answer = honest_controls(kit_version, mechanism_id, &honest);
  if (answer.code != NXMEM_STATUS_OK) return answer;
  honest_table = honest;
  wrapped_controls = *honest;
#define WRAP(slot) wrapped_controls.slot = honest->slot != NULL ? w_##slot : NULL
  WRAP(open_queue);
  WRAP(record_use);
  WRAP(signal_fences);
  WRAP(close_queue);
  WRAP(lose_device);
  WRAP(arm_fault);
  WRAP(clear_faults);
#undef WRAP
  *out = &wrapped_controls;
  return answer;
}
#endif

/* ---- the factory, wrapped ----------------------------------------------- */

static NxmemAllocatorFactoryVtable wrapped_factory;

static NxmemStatus wrapping_open(void* ctx, const NxmemOpenRequest* request, const NxmemAllocatorVtable** out) {
  const NxmemAllocatorFactoryVtable* const* honest_factory = ctx;
  Wrapped* w = calloc(1, sizeof *w);
  if (w == NULL) return example_status(NXMEM_STATUS_OUT_OF_MEMORY, "no memory for the wrapper");
  pthread_mutex_init(&w->mutex, NULL);
  atomic_init(&w->references, 1);
  /* The honest plugin completes into the wrapper, which forwards to the
   * host; anything it would not read as a callback table goes as it is. */
  NxmemOpenRequest relayed;
  const NxmemOpenRequest* asked = request;
  if (request != NULL && request->struct_size >= sizeof(NxmemOpenRequest) && request->callbacks != NULL &&
      request->callbacks->struct_size >= sizeof(NxmemHostCallbacks)) {
    w->host = *request->callbacks;
    w->relay.struct_size = sizeof w->relay;
    w->relay.abi_minor = w->host.abi_minor;
    w->relay.host_ctx = w;
    w->relay.request_reclaim = w->host.request_reclaim != NULL ? relay_request_reclaim : NULL;
    w->relay.release_completed = w->host.release_completed != NULL ? relay_release_completed : NULL;
    relayed = *request;
    relayed.callbacks = &w->relay;
    asked = &relayed;
  }
  const NxmemAllocatorVtable* honest = NULL;
  NxmemStatus answer = (*honest_factory)->open_allocator((*honest_factory)->ctx, asked, &honest);
  if (answer.code != NXMEM_STATUS_OK) {
    drop(w);
    return answer;
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
  if (honest->enqueue_release != NULL) w->allocator.enqueue_release = w_enqueue_release;
  if (honest->drain_releases != NULL) w->allocator.drain_releases = w_drain_releases;
  if (honest->pending_release_count != NULL) w->allocator.pending_release_count = w_pending_release_count;
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
