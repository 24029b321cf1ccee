/* adapters/plugin/known_bad/abi_lies.c: known-bad nxmem plugins that load
 * cleanly, pass the memory contract through the kit's bridge, and break one
 * rule of the nxmem boundary itself (the ABI requirements, which the kit
 * checks by calling the exports and slots raw, with no host filter).
 *
 * Each is an example plugin (BASE_VM: vm_host_plugin.c, else
 * eager_host_plugin.c) with its three exports renamed and wrapped, and, where
 * the lie is in an allocator slot, every vtable it opens copied into a
 * forwarding wrapper. Exactly one answer, chosen by LIE, is bent on its way
 * out, and only under the condition a real bug would have (a size range, a
 * refusal code, a host that is not the loader); everything else is the
 * honest example's. The loader refuses at load anything that breaks a
 * struct, vtable or negotiation rule it checks, so no lie may show in an
 * answer to the exact requests the loader sends.
 *
 * One library per lie; abi_manifest.json lists each with the requirements
 * the kit must fail it on.
 */
#define NxmemNegotiate honest_negotiate
#define NxmemCreateAllocatorFactories honest_create_factories
#define NxmemQueryUnloadReadiness honest_query_unload
/* Not exported: these lies are the boundary's, and the wrapper forwards no
 * control table (a control called with the wrapper's ctx would reach the
 * honest plugin with a pointer it never made). Requirements that need a
 * control stay out of scope, as for any plugin without the extension. */
#define OrtmemCtsPluginControls abi_lies_unexported_controls
#if BASE_VM
#include "plugin/examples/vm_host_plugin.c"
#else
#include "plugin/examples/eager_host_plugin.c"
#endif
#undef NxmemNegotiate
#undef NxmemCreateAllocatorFactories
#undef NxmemQueryUnloadReadiness

#define LIE_SHORT_REQUEST_ANSWERED_OK 1
#define LIE_REFUSAL_LEAVES_RANGE_EMPTY 2
#define LIE_OFFERS_BITS_HOST_WITHHELD 3
#define LIE_AGREES_MINOR_ABOVE_HOST 4
#define LIE_MESSAGE_NOT_TERMINATED 5
#define LIE_MESSAGE_NOT_UTF8 6
#define LIE_DEVICE_CHECKED_BEFORE_MECHANISM 7
#define LIE_LOOKUP_BY_ADDRESS_ONLY 8
#define LIE_OPEN_IGNORES_REQUIRED_CAPABILITY 9
#define LIE_UNLOAD_REPORT_ALWAYS_ZERO 10
#define LIE_UNLOAD_NEVER_DROPS_ALLOCATIONS 11
#define LIE_COMPLETION_UNDER_OWN_LOCK 12
#define LIE_COMPLETION_NAMES_WRONG_MECHANISM 13

#include <pthread.h>
#include <stdatomic.h>

#ifndef LIE
#error "LIE must name the one rule this plugin breaks"
#endif

/* The lies that need the vm example: more capabilities than ALLOCATOR, a
 * minor-1 plugin, or deferred release. A manifest entry that forgets
 * base_vm fails the build here rather than building a plugin that cannot lie. */
#if (LIE == LIE_OFFERS_BITS_HOST_WITHHELD || LIE == LIE_AGREES_MINOR_ABOVE_HOST || LIE == LIE_MESSAGE_NOT_UTF8 || \
     LIE == LIE_UNLOAD_NEVER_DROPS_ALLOCATIONS || LIE == LIE_COMPLETION_UNDER_OWN_LOCK ||                         \
     LIE == LIE_COMPLETION_NAMES_WRONG_MECHANISM) &&                                                              \
    !BASE_VM
#error "this lie is told over the vm example: set base_vm in the manifest"
#endif
/* The lies that reach into the eager example's own allocation table or its
 * allocator-only factory. */
#if (LIE == LIE_DEVICE_CHECKED_BEFORE_MECHANISM || LIE == LIE_LOOKUP_BY_ADDRESS_ONLY ||      \
     LIE == LIE_OPEN_IGNORES_REQUIRED_CAPABILITY || LIE == LIE_UNLOAD_REPORT_ALWAYS_ZERO) && \
    BASE_VM
#error "this lie is told over the eager example: clear base_vm in the manifest"
#endif

/* Whether the lie is in an allocator (or capability) slot, so the factory
 * hands out wrapped vtables; the negotiation and unload lies leave every
 * vtable the honest one. */
#define WRAPS_ALLOCATOR                                                                                              \
  (LIE == LIE_MESSAGE_NOT_TERMINATED || LIE == LIE_MESSAGE_NOT_UTF8 || LIE == LIE_DEVICE_CHECKED_BEFORE_MECHANISM || \
   LIE == LIE_LOOKUP_BY_ADDRESS_ONLY || LIE == LIE_OPEN_IGNORES_REQUIRED_CAPABILITY ||                               \
   LIE == LIE_UNLOAD_NEVER_DROPS_ALLOCATIONS || LIE == LIE_COMPLETION_UNDER_OWN_LOCK ||                              \
   LIE == LIE_COMPLETION_NAMES_WRONG_MECHANISM)
/* Whether completions pass through the wrapper on their way to the host. */
#define RELAYS_COMPLETIONS (LIE == LIE_COMPLETION_UNDER_OWN_LOCK || LIE == LIE_COMPLETION_NAMES_WRONG_MECHANISM)

/* ---- negotiation ---------------------------------------------------------- */

/* The honest example's answer, bent by the negotiation lies. The loader sends
 * struct_size 32, host range {1, 1, 0, m} and flags 0x1f at m = 1 or 0x0f at
 * m = 0 (it withholds STRUCTURED_RELEASE under minor 1): each lie below
 * answers those exactly as the honest example does. */
NxmemStatus NxmemNegotiate(const NxmemNegotiateRequest* request, NxmemNegotiateResponse* response) {
#if LIE == LIE_SHORT_REQUEST_ANSWERED_OK
  /* The bug: the request is read the way the ABI reads most short structs
   * (what the writer did not send reads as zero), and a zero field is then
   * taken as "the host did not say" and defaulted to this ABI's own 1.0-1.1
   * with every known bit, so a short request is agreed like a full one. The
   * negotiation request is the one struct the ABI says to refuse when short.
   * Only a request too short to hold its own header (under 8 bytes) is still
   * refused; a full one is answered honestly. */
  if (request != NULL && response != NULL && request->struct_size >= 8 &&
      request->struct_size < sizeof(NxmemNegotiateRequest)) {
    NxmemNegotiateRequest padded;
    memset(&padded, 0, sizeof padded);
    memcpy(&padded, request, request->struct_size); /* never past what the host says it wrote */
    if (padded.host_range.major_min == 0) padded.host_range.major_min = NXMEM_ABI_VERSION_MAJOR;
    if (padded.host_range.major_max == 0) padded.host_range.major_max = NXMEM_ABI_VERSION_MAJOR;
    if (padded.host_range.minor_max == 0) padded.host_range.minor_max = NXMEM_ABI_VERSION_MINOR;
    if (padded.host_capability_flags == 0) padded.host_capability_flags = NXMEM_CAP_KNOWN_MASK;
    padded.struct_size = sizeof padded;
    return honest_negotiate(&padded, response);
  }
#endif
  const NxmemStatus answer = honest_negotiate(request, response);
  if (request == NULL || response == NULL) return answer;
#if LIE == LIE_REFUSAL_LEAVES_RANGE_EMPTY
  /* The bug: the major gate returns before plugin_range is filled, so a host
   * of another major learns nothing of what this plugin speaks. The other
   * refusals (short request, minors, no ALLOCATOR) still fill it. */
  if (answer.code == NXMEM_STATUS_VERSION_MISMATCH && (request->host_range.major_min > NXMEM_ABI_VERSION_MAJOR ||
                                                       request->host_range.major_max < NXMEM_ABI_VERSION_MAJOR)) {
    memset(&response->plugin_range, 0, sizeof response->plugin_range);
  }
#elif LIE == LIE_OFFERS_BITS_HOST_WITHHELD
  /* The bug: the offer is the plugin's own flags, never ANDed with the
   * host's; only the rule for bits above the agreed minor is kept. The
   * ALLOCATOR refusal is the honest one. Against the loader's flags (every
   * bit the agreed minor has) this is the honest answer. */
  if (answer.code == NXMEM_STATUS_OK) {
    uint64_t flags = PLUGIN_CAPS & NXMEM_CAP_KNOWN_MASK;
    if (response->agreed_minor < 1) flags &= ~NXMEM_CAP_STRUCTURED_RELEASE;
    response->capability_flags = flags;
  }
#elif LIE == LIE_AGREES_MINOR_ABOVE_HOST
  /* The bug: a host capped at minor 0 is taken to mean "minor 0 is the
   * least you need", and the plugin's own highest minor is agreed. The
   * loader checks the agreed minor against its range and would refuse this
   * at load under --abi-minor 0, so the plugin (wrongly) recognises the
   * loader's exact minor-0 request, flags 0x0f, and answers it honestly; a
   * minor-0 host offering any other flags (0x1f, say) gets minor 1, with the
   * bits minor 1 allows. */
  const uint64_t loader_minor0_flags = NXMEM_CAP_KNOWN_MASK & ~NXMEM_CAP_STRUCTURED_RELEASE;
  if (answer.code == NXMEM_STATUS_OK && request->host_range.minor_max < 1 &&
      request->host_capability_flags != loader_minor0_flags) {
    response->agreed_minor = 1;
    response->capability_flags = PLUGIN_CAPS & request->host_capability_flags & NXMEM_CAP_KNOWN_MASK;
    atomic_store(&negotiated_minor, 1); /* what the plugin now believes it agreed */
  }
#endif
  return answer;
}

/* ---- the unload report ------------------------------------------------------ */

#if LIE == LIE_UNLOAD_NEVER_DROPS_ALLOCATIONS
/* Allocations this module has made, ever: counted where they are made and
 * nowhere else, which is the bug. */
static atomic_uint_fast64_t allocations_made;
#endif

NxmemStatus NxmemQueryUnloadReadiness(NxmemUnloadReport* report) {
  const NxmemStatus answer = honest_query_unload(report);
  if (answer.code != NXMEM_STATUS_OK) return answer;
#if LIE == LIE_UNLOAD_REPORT_ALWAYS_ZERO
  /* The bug: the report is a stub that says "nothing live" whatever is open.
   * Over the eager example, whose only threads are the host's, a premature
   * unload by the kit after it released everything is still safe. */
  memset(report, 0, sizeof *report);
  report->struct_size = sizeof *report;
#elif LIE == LIE_UNLOAD_NEVER_DROPS_ALLOCATIONS
  /* The bug: live_allocations counts allocations made and never those
   * released, so once anything was allocated the report never reaches zero
   * and the module is never unloaded (the kit leaks it, which is safe). */
  report->live_allocations = atomic_load(&allocations_made);
#endif
  return answer;
}

#if !WRAPS_ALLOCATOR
NxmemStatus NxmemCreateAllocatorFactories(const NxmemAllocatorFactoryVtable** out, uint64_t max, uint64_t* count) {
  return honest_create_factories(out, max, count);
}
#else

/* ---- the wrapper ------------------------------------------------------------ */

typedef struct Wrapped {
  NxmemAllocatorVtable allocator; /* what the host sees; every ctx is this wrapper */
#if BASE_VM
  NxmemVirtualBackingVtable virtual_backing;
  NxmemSharedMappingVtable shared_mapping;
#endif
  const NxmemAllocatorVtable* honest;
#if RELAYS_COMPLETIONS
  /* Set at open, before the honest plugin can call either, and never
   * written again: `relay` is the table the honest plugin was given (its
   * host_ctx is this wrapper), `host` a copy of the host's own. */
  NxmemHostCallbacks relay;
  NxmemHostCallbacks host;
  /* Guards `relayed`. Under LIE_COMPLETION_UNDER_OWN_LOCK it is also the
   * lock held across the host's release_completed, which is the lie. */
  pthread_mutex_t mutex;
  uint64_t relayed; /* completions the honest plugin has delivered */
#endif
  /* One per release the host owes (the open, and each retain) and, when
   * completions are relayed, one per ticket the honest plugin has yet to
   * complete: its worker may deliver one after the host has dropped the
   * allocator, and this wrapper is that completion's host_ctx. */
  atomic_uint_fast64_t references;
} Wrapped;

#define HONEST(ctx) (((Wrapped*)(ctx))->honest)

static void drop(Wrapped* w) {
  if (atomic_fetch_sub(&w->references, 1) != 1) return;
#if RELAYS_COMPLETIONS
  pthread_mutex_destroy(&w->mutex);
#endif
  free(w);
}

/* Every status a wrapped slot returns passes through here on its way out. */
static NxmemStatus bend(NxmemStatus status) {
#if LIE == LIE_MESSAGE_NOT_TERMINATED
  /* The bug: message_len is set to the length of the plugin's name prefix
   * ("eager-host"), computed before the detail was appended, so the byte at
   * message[message_len] is the ':' that follows it, not a NUL. Only the
   * UNKNOWN_ALLOCATION refusal is built that way. */
  if (status.code == NXMEM_STATUS_UNKNOWN_ALLOCATION) {
    const uint8_t* colon = memchr(status.message, ':', status.message_len);
    if (colon != NULL) status.message_len = (uint32_t)(colon - status.message);
  }
#elif LIE == LIE_MESSAGE_NOT_UTF8
  /* The bug: the identity refusals were localised in a source file saved as
   * Latin-1, so each é and à is the single byte 0xE9 or 0xE0, which UTF-8
   * never allows before an ASCII byte. The messages are NUL-terminated and
   * of the right length; only their encoding is wrong. (Each escape is ended
   * by closing the literal, since a hex escape eats every hex digit after it.) */
  if (status.code == NXMEM_STATUS_WRONG_MECHANISM) {
    status = example_status(status.code, NAME
                            ": m\xe9"
                            "canisme \xe9"
                            "tranger");
  } else if (status.code == NXMEM_STATUS_WRONG_DEVICE) {
    status = example_status(status.code, NAME ": p\xe9riph\xe9rique \xe9tranger");
  } else if (status.code == NXMEM_STATUS_UNKNOWN_ALLOCATION) {
    status = example_status(status.code, NAME
                            ": allocation inconnue (d\xe9j\xe0 lib\xe9r\xe9"
                            "e ?)");
  }
#endif
  return status;
}

#if LIE == LIE_DEVICE_CHECKED_BEFORE_MECHANISM
/* The bug: the identity check asks for the device first, so a call from
 * another mechanism on another device is told WRONG_DEVICE, not
 * WRONG_MECHANISM. A call wrong in one way only is answered as the honest
 * example would, since the example's own checks follow. */
static int on_another_device(const void* ctx, NxmemDeviceId device) {
  const NxmemDeviceId mine = HONEST(ctx)->device;
  return device.tier != mine.tier || device.index != mine.index;
}
static NxmemStatus wrong_device(void) {
  return example_status(NXMEM_STATUS_WRONG_DEVICE, "eager-host: not this allocator's device");
}
#endif

#if RELAYS_COMPLETIONS
/* ---- the host's callbacks, relayed ---------------------------------------- */

static NxmemStatus relay_release_completed(void* host_ctx, const NxmemReleaseCompletion* completion) {
  Wrapped* w = host_ctx;
  NxmemReleaseCompletion bent = *completion;
  NxmemStatus answer;
#if LIE == LIE_COMPLETION_UNDER_OWN_LOCK
  /* The lie: the lock pending_release_count takes is held across the host's
   * callback. It is a recursive mutex, so a call back into
   * pending_release_count from the same thread (the kit's bridge makes one
   * inside every completion, and the honest vm example allows it) still
   * returns, and the kit's other deferred-release tests run as over the
   * honest example; a call from any other thread waits until the callback
   * has returned. A plain mutex would deadlock the bridge's own re-entry
   * and turn every deferred test into a hang, hiding which rule broke. No
   * thread waits for this lock while holding the honest plugin's mutex
   * (pending_release_count takes this one first, and the honest example
   * drops its own before every callback), so it cannot deadlock against the
   * plugin itself; only a host thread calling pending_release_count during
   * a completion is made to wait, which is the lie. */
  pthread_mutex_lock(&w->mutex);
  ++w->relayed;
  answer = w->host.release_completed(w->host.host_ctx, &bent);
  pthread_mutex_unlock(&w->mutex);
#else /* LIE_COMPLETION_NAMES_WRONG_MECHANISM */
  pthread_mutex_lock(&w->mutex);
  const uint64_t nth = ++w->relayed;
  pthread_mutex_unlock(&w->mutex);
  /* The bug: the completion's mechanism is copied from a field filled in
   * lazily, after the first completion of each allocator has gone out, so
   * that first one (ticket 1, since the honest plugin delivers in order)
   * names mechanism 0. Every later one is honest. */
  if (nth == 1) bent.mechanism_id = 0;
  answer = w->host.release_completed(w->host.host_ctx, &bent);
#endif
  drop(w); /* this ticket's reference; never with the mutex held */
  return answer;
}

static NxmemStatus relay_request_reclaim(void* host_ctx, const NxmemReclaimRequest* request, uint64_t* reclaimed_out) {
  Wrapped* w = host_ctx;
  return w->host.request_reclaim(w->host.host_ctx, request, reclaimed_out);
}
#endif

/* ---- the allocator's slots ------------------------------------------------ */

static NxmemStatus w_allocate(void* ctx, const NxmemAllocRequest* request, NxmemAllocResult* result) {
#if LIE == LIE_DEVICE_CHECKED_BEFORE_MECHANISM
  if (request != NULL && on_another_device(ctx, request->device)) return wrong_device();
#endif
  const NxmemStatus answer = HONEST(ctx)->allocate(HONEST(ctx)->ctx, request, result);
#if LIE == LIE_UNLOAD_NEVER_DROPS_ALLOCATIONS
  if (answer.code == NXMEM_STATUS_OK) atomic_fetch_add(&allocations_made, 1);
#endif
  return bend(answer);
}

static NxmemStatus w_deallocate(void* ctx, const NxmemAllocation* allocation, uint64_t* unmapped_out) {
  if (allocation == NULL) return bend(HONEST(ctx)->deallocate(HONEST(ctx)->ctx, allocation, unmapped_out));
#if LIE == LIE_DEVICE_CHECKED_BEFORE_MECHANISM
  if (on_another_device(ctx, allocation->device)) return wrong_device();
#endif
  NxmemAllocation named = *allocation;
#if LIE == LIE_LOOKUP_BY_ADDRESS_ONLY
  /* The bug: the table is searched by address alone, and the entry found
   * there is what is released, whatever id and size the call named. The
   * mechanism and device are still checked first (by the honest example,
   * on the unchanged fields), and an address no longer live is still
   * refused as UNKNOWN_ALLOCATION, so a second release of the same
   * allocation fails as the core contract expects and nothing is freed
   * twice. The table's mutex is dropped before the honest call, which takes
   * it again; a racing release of the same address then simply loses the
   * honest lookup and is refused. */
  Allocator* table = HONEST(ctx)->ctx;
  pthread_mutex_lock(&table->mutex);
  for (const Entry* entry = table->live; entry != NULL; entry = entry->next) {
    if (entry->ptr == allocation->ptr) {
      named.allocation_id = entry->id;
      named.bytes = entry->bytes;
      break;
    }
  }
  pthread_mutex_unlock(&table->mutex);
#endif
  return bend(HONEST(ctx)->deallocate(HONEST(ctx)->ctx, &named, unmapped_out));
}

static void w_retain(void* ctx) {
  atomic_fetch_add(&((Wrapped*)ctx)->references, 1);
  HONEST(ctx)->retain(HONEST(ctx)->ctx);
}

static void w_release(void* ctx) {
  const NxmemAllocatorVtable* honest = HONEST(ctx);
  honest->release(honest->ctx); /* the final one delivers every ticket still queued */
  drop(ctx);
}

#if BASE_VM
static NxmemStatus w_release_allocation(void* ctx, const NxmemAllocation* allocation, NxmemReleaseOutcome* outcome) {
  NxmemStatus answer = bend(HONEST(ctx)->release_allocation(HONEST(ctx)->ctx, allocation, outcome));
  /* A FAILED outcome carries the refusal that caused it: it is a status the
   * plugin returns too. */
  if (answer.code == NXMEM_STATUS_OK && outcome != NULL && outcome->state == NXMEM_RELEASE_FAILED) {
    outcome->failure = bend(outcome->failure);
  }
  return answer;
}

static NxmemStatus w_enqueue_release(void* ctx, const NxmemAllocation* allocation, uint64_t* ticket_out) {
#if RELAYS_COMPLETIONS
  /* Taken before the call: the completion may come inside it. */
  atomic_fetch_add(&((Wrapped*)ctx)->references, 1);
#endif
  const NxmemStatus answer = HONEST(ctx)->enqueue_release(HONEST(ctx)->ctx, allocation, ticket_out);
#if RELAYS_COMPLETIONS
  if (answer.code != NXMEM_STATUS_OK) drop(ctx); /* nothing was queued */
#endif
  return bend(answer);
}

static NxmemStatus w_drain_releases(void* ctx, uint64_t max, uint64_t* retired_out) {
  return bend(HONEST(ctx)->drain_releases(HONEST(ctx)->ctx, max, retired_out));
}

static NxmemStatus w_pending_release_count(void* ctx, uint64_t* count_out) {
#if LIE == LIE_COMPLETION_UNDER_OWN_LOCK
  /* The lock the relay holds across release_completed (see there). */
  Wrapped* w = ctx;
  pthread_mutex_lock(&w->mutex);
  const NxmemStatus answer = HONEST(ctx)->pending_release_count(HONEST(ctx)->ctx, count_out);
  pthread_mutex_unlock(&w->mutex);
  return bend(answer);
#else
  return bend(HONEST(ctx)->pending_release_count(HONEST(ctx)->ctx, count_out));
#endif
}

/* ---- virtual backing ------------------------------------------------------ */

#define HONEST_VB(ctx) (HONEST(ctx)->virtual_backing)
#define HONEST_SM(ctx) (HONEST(ctx)->shared_mapping)

static NxmemStatus w_allocate_committed(void* ctx, const NxmemAllocRequest* request, NxmemAllocResult* result) {
  const NxmemStatus answer = HONEST_VB(ctx)->allocate_committed(HONEST_VB(ctx)->ctx, request, result);
#if LIE == LIE_UNLOAD_NEVER_DROPS_ALLOCATIONS
  if (answer.code == NXMEM_STATUS_OK) atomic_fetch_add(&allocations_made, 1);
#endif
  return bend(answer);
}
static NxmemStatus w_commit_range(void* ctx, const NxmemRangeRequest* request) {
  return bend(HONEST_VB(ctx)->commit_range(HONEST_VB(ctx)->ctx, request));
}
static NxmemStatus w_decommit_range(void* ctx, const NxmemRangeRequest* request, uint64_t* unmapped_out) {
  return bend(HONEST_VB(ctx)->decommit_range(HONEST_VB(ctx)->ctx, request, unmapped_out));
}
static NxmemStatus w_mapped_bytes_for_ranges(void* ctx, const NxmemRangeRequest* requests, uint64_t count,
                                             uint64_t* mapped_out) {
  return bend(HONEST_VB(ctx)->mapped_bytes_for_ranges(HONEST_VB(ctx)->ctx, requests, count, mapped_out));
}
static NxmemStatus w_mapped_bytes_for_allocation(void* ctx, const NxmemAllocRequest* request, uint64_t* mapped_out) {
  return bend(HONEST_VB(ctx)->mapped_bytes_for_allocation(HONEST_VB(ctx)->ctx, request, mapped_out));
}
static NxmemStatus w_committed_bytes(void* ctx, const NxmemAllocation* allocation, uint64_t* committed_out) {
  return bend(HONEST_VB(ctx)->committed_bytes(HONEST_VB(ctx)->ctx, allocation, committed_out));
}

/* ---- shared mapping ------------------------------------------------------- */

static NxmemStatus w_create_shared_prefix(void* ctx, uint64_t mechanism_id, uint64_t bytes,
                                          NxmemSharedPrefixHandle* handle_out) {
  return bend(HONEST_SM(ctx)->create_shared_prefix(HONEST_SM(ctx)->ctx, mechanism_id, bytes, handle_out));
}
static NxmemStatus w_retain_shared_prefix(void* ctx, const NxmemSharedPrefixHandle* handle) {
  return bend(HONEST_SM(ctx)->retain_shared_prefix(HONEST_SM(ctx)->ctx, handle));
}
static NxmemStatus w_release_shared_prefix(void* ctx, const NxmemSharedPrefixHandle* handle) {
  return bend(HONEST_SM(ctx)->release_shared_prefix(HONEST_SM(ctx)->ctx, handle));
}
static NxmemStatus w_incremental_owned_bytes(void* ctx, const NxmemSharedPrefixHandle* handle, uint64_t* bytes_out) {
  return bend(HONEST_SM(ctx)->incremental_owned_bytes(HONEST_SM(ctx)->ctx, handle, bytes_out));
}
static NxmemStatus w_commit_shared_prefix(void* ctx, const NxmemSharedPrefixCommitRequest* request,
                                          NxmemSharedPrefixCommitInfo* info_out) {
  return bend(HONEST_SM(ctx)->commit_shared_prefix(HONEST_SM(ctx)->ctx, request, info_out));
}
#endif /* BASE_VM */

/* ---- the factory, wrapped ------------------------------------------------- */

static NxmemStatus wrapping_open(void* ctx, const NxmemOpenRequest* request, const NxmemAllocatorVtable** out) {
  const NxmemAllocatorFactoryVtable* const* honest_factory = ctx;
  Wrapped* w = calloc(1, sizeof *w);
  if (w == NULL) return example_status(NXMEM_STATUS_OUT_OF_MEMORY, "no memory for the wrapper");
  atomic_init(&w->references, 1);
  const NxmemOpenRequest* asked = request;
#if LIE == LIE_OPEN_IGNORES_REQUIRED_CAPABILITY || RELAYS_COMPLETIONS
  NxmemOpenRequest bent_request; /* what the honest factory is asked instead */
#endif
#if LIE == LIE_OPEN_IGNORES_REQUIRED_CAPABILITY
  /* The bug: the factory refuses a required capability only among those it
   * thinks of as behaviour (deferred and structured release); virtual
   * backing and shared mapping it takes for optional pointers the host will
   * find NULL, and drops them from the request. So an open requiring either
   * returns an ordinary allocator-only allocator instead of
   * UNSUPPORTED_CAPABILITY. */
  const uint64_t memory_bits = NXMEM_CAP_VIRTUAL_BACKING | NXMEM_CAP_SHARED_MAPPING;
  if (request != NULL && request->struct_size >= sizeof(NxmemOpenRequest) &&
      (request->required_capability_flags & memory_bits) != 0) {
    bent_request = *request;
    bent_request.required_capability_flags &= ~memory_bits;
    asked = &bent_request;
  }
#endif
#if RELAYS_COMPLETIONS
#if LIE == LIE_COMPLETION_UNDER_OWN_LOCK
  pthread_mutexattr_t recursive;
  pthread_mutexattr_init(&recursive);
  pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
  const int made = pthread_mutex_init(&w->mutex, &recursive);
  pthread_mutexattr_destroy(&recursive);
#else
  const int made = pthread_mutex_init(&w->mutex, NULL);
#endif
  if (made != 0) {
    free(w);
    return example_status(NXMEM_STATUS_OUT_OF_MEMORY, "no mutex for the wrapper");
  }
  /* The honest plugin completes into the wrapper, which forwards to the
   * host; anything it would not read as a callback table goes as it is. */
  if (request != NULL && request->struct_size >= sizeof(NxmemOpenRequest) && request->callbacks != NULL &&
      request->callbacks->struct_size >= sizeof(NxmemHostCallbacks)) {
    w->host = *request->callbacks;
    w->relay.struct_size = sizeof w->relay;
    w->relay.abi_minor = w->host.abi_minor;
    w->relay.host_ctx = w;
    w->relay.request_reclaim = w->host.request_reclaim != NULL ? relay_request_reclaim : NULL;
    w->relay.release_completed = w->host.release_completed != NULL ? relay_release_completed : NULL;
    bent_request = *request;
    bent_request.callbacks = &w->relay;
    asked = &bent_request;
  }
#endif
  const NxmemAllocatorVtable* honest = NULL;
  const NxmemStatus answer = (*honest_factory)->open_allocator((*honest_factory)->ctx, asked, &honest);
  if (answer.code != NXMEM_STATUS_OK) {
    drop(w);
    return bend(answer);
  }
  w->honest = honest;
  w->allocator = *honest;
  w->allocator.ctx = w;
  w->allocator.allocate = w_allocate;
  w->allocator.deallocate = w_deallocate;
  w->allocator.retain = w_retain;
  w->allocator.release = w_release;
#if BASE_VM
  if (honest->struct_size >= sizeof(NxmemAllocatorVtable) && honest->release_allocation != NULL) {
    w->allocator.release_allocation = w_release_allocation;
  }
  if (honest->enqueue_release != NULL) w->allocator.enqueue_release = w_enqueue_release;
  if (honest->drain_releases != NULL) w->allocator.drain_releases = w_drain_releases;
  if (honest->pending_release_count != NULL) w->allocator.pending_release_count = w_pending_release_count;
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
 * slot is the honest one, which ignores its ctx in both examples. Written
 * only by NxmemCreateAllocatorFactories, which the host calls once, at load. */
static NxmemAllocatorFactoryVtable wrapped_factory;
static const NxmemAllocatorFactoryVtable* honest_factory_slot;

NxmemStatus NxmemCreateAllocatorFactories(const NxmemAllocatorFactoryVtable** out, uint64_t max, uint64_t* count) {
  const NxmemStatus answer = honest_create_factories(out, max, count);
  if (answer.code != NXMEM_STATUS_OK || *count < 1) return answer;
  honest_factory_slot = out[0];
  wrapped_factory = *out[0];
  wrapped_factory.ctx = (void*)&honest_factory_slot;
  wrapped_factory.open_allocator = wrapping_open;
  out[0] = &wrapped_factory;
  return answer;
}
#endif /* WRAPS_ALLOCATOR */
