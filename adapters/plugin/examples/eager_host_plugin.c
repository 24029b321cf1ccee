/* adapters/plugin/examples/eager_host_plugin.c: the smallest conformant nxmem
 * plugin. One factory, "eager-host", hands out host memory from
 * aligned_alloc at ABI minor 0: the allocator capability and nothing else.
 *
 * It keeps its own table of what it handed out, because the ABI makes the
 * plugin check every allocation it is given back: the mechanism first, then
 * the device, then whether it holds that id (WRONG_MECHANISM, WRONG_DEVICE,
 * UNKNOWN_ALLOCATION). The table is guarded by one mutex that is never held
 * across a call into the host (this plugin makes none).
 *
 * The allocation itself is the backend's: a file that defines
 * EAGER_BACKEND, with NAME, MECHANISM_ID, BACKEND_ALLOC(bytes, align) and
 * BACKEND_FREE(ptr, bytes, align), and then includes this one is the same
 * plugin over another allocator (adapters/third_party/ wraps the allocators
 * Debian ships this way). `bytes` is at least 1 and `align` a power of two
 * of at least sizeof(void*); a backend answers NULL when it cannot.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "example_support.h"
#include "nxmem/nxmem_abi.h"

#ifndef EAGER_BACKEND
#define NAME "eager-host"
#define MECHANISM_ID 0x6561676572ull /* "eager" */
/* aligned_alloc takes only a size that is a multiple of the alignment. */
#define BACKEND_ALLOC(bytes, align) aligned_alloc((align), ((bytes) + (align)-1) & ~((uint64_t)(align)-1))
#define BACKEND_FREE(ptr, bytes, align) free(ptr)
#endif

/* ---- the allocation table --------------------------------------------- */

typedef struct Entry {
  uint64_t id;
  uint8_t* ptr;
  uint64_t bytes;
  uint64_t wanted; /* what the backend was asked for, and is told again at free */
  uint64_t align;
  struct Entry* next;
} Entry;

typedef struct Allocator {
  NxmemAllocatorVtable vtable;
  pthread_mutex_t mutex;
  Entry* live; /* guarded by mutex */
  atomic_uint_fast64_t references;
} Allocator;

static atomic_uint_fast64_t live_allocators;
static atomic_uint_fast64_t live_allocations;
static atomic_uint_fast64_t live_factories;

static int is_power_of_two(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

static NxmemStatus check_identity(const Allocator* self, uint64_t mechanism_id, NxmemDeviceId device) {
  if (mechanism_id != MECHANISM_ID)
    return example_status(NXMEM_STATUS_WRONG_MECHANISM, NAME ": not this mechanism's allocation");
  if (device.tier != self->vtable.device.tier || device.index != self->vtable.device.index) {
    return example_status(NXMEM_STATUS_WRONG_DEVICE, NAME ": not this allocator's device");
  }
  return example_ok();
}

static NxmemStatus eager_allocate(void* ctx, const NxmemAllocRequest* request, NxmemAllocResult* result) {
  Allocator* self = ctx;
  if (request == NULL || result == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  if (request->struct_size < sizeof(NxmemAllocRequest))
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short request");
  NxmemStatus identity = check_identity(self, request->mechanism_id, request->device);
  if (identity.code != NXMEM_STATUS_OK) return identity;
  if (!is_power_of_two(request->align))
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": alignment is not a power of two");
  if (request->allocation_id == 0) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": allocation id 0");
  const uint64_t align = request->align < sizeof(void*) ? sizeof(void*) : request->align;
  /* Zero bytes still get a distinct address; round up without overflow. */
  const uint64_t wanted = request->bytes == 0 ? 1 : request->bytes;
  if (wanted > UINT64_MAX - (align - 1)) {
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": the size overflows when rounded up to the alignment");
  }
  Entry* entry = malloc(sizeof *entry);
  if (entry == NULL) return example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory for the table");
  uint8_t* ptr = BACKEND_ALLOC(wanted, align);
  if (ptr == NULL) {
    free(entry);
    return example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": the allocator refused");
  }
  entry->id = request->allocation_id;
  entry->ptr = ptr;
  entry->bytes = request->bytes;
  entry->wanted = wanted;
  entry->align = align;
  pthread_mutex_lock(&self->mutex);
  entry->next = self->live;
  self->live = entry;
  pthread_mutex_unlock(&self->mutex);
  atomic_fetch_add(&live_allocations, 1);
  memset(result, 0, sizeof *result);
  result->struct_size = sizeof *result;
  result->ptr = ptr;
  result->owned_bytes = request->bytes;
  result->mapped_bytes = request->bytes;
  return example_ok();
}

static NxmemStatus eager_deallocate(void* ctx, const NxmemAllocation* allocation, uint64_t* unmapped_out) {
  Allocator* self = ctx;
  if (allocation == NULL || unmapped_out == NULL)
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  NxmemStatus identity = check_identity(self, allocation->mechanism_id, allocation->device);
  if (identity.code != NXMEM_STATUS_OK) return identity;
  pthread_mutex_lock(&self->mutex);
  Entry** link = &self->live;
  while (*link != NULL && (*link)->id != allocation->allocation_id) link = &(*link)->next;
  Entry* found = *link;
  if (found != NULL && (found->ptr != allocation->ptr || found->bytes != allocation->bytes)) found = NULL;
  if (found != NULL) *link = found->next;
  pthread_mutex_unlock(&self->mutex);
  if (found == NULL)
    return example_status(NXMEM_STATUS_UNKNOWN_ALLOCATION, NAME ": no live allocation with this id, address and size");
  BACKEND_FREE(found->ptr, found->wanted, found->align);
  free(found);
  atomic_fetch_sub(&live_allocations, 1);
  /* The memory goes back to the allocator's heap, which unmaps nothing we can name. */
  *unmapped_out = 0;
  return example_ok();
}

static void eager_retain(void* ctx) { atomic_fetch_add(&((Allocator*)ctx)->references, 1); }

static void eager_release(void* ctx) {
  Allocator* self = ctx;
  if (atomic_fetch_sub(&self->references, 1) != 1) return;
  /* The host releases every allocation before the allocator; anything left is
   * freed here so the module can be unloaded. */
  for (Entry* entry = self->live; entry != NULL;) {
    Entry* next = entry->next;
    BACKEND_FREE(entry->ptr, entry->wanted, entry->align);
    free(entry);
    atomic_fetch_sub(&live_allocations, 1);
    entry = next;
  }
  pthread_mutex_destroy(&self->mutex);
  free(self);
  atomic_fetch_sub(&live_allocators, 1);
}

/* ---- the factory ------------------------------------------------------- */

static NxmemStatus open_allocator(void* ctx, const NxmemOpenRequest* request, const NxmemAllocatorVtable** out) {
  (void)ctx;
  if (request == NULL || out == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  if (request->device.tier != NXMEM_TIER_HOST)
    return example_status(NXMEM_STATUS_WRONG_DEVICE, NAME ": host memory only");
  if ((request->required_capability_flags & ~NXMEM_CAP_ALLOCATOR) != 0) {
    return example_status(NXMEM_STATUS_UNSUPPORTED_CAPABILITY, NAME ": offers the allocator capability only");
  }
  Allocator* self = calloc(1, sizeof *self);
  if (self == NULL) return example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory for an allocator");
  pthread_mutex_init(&self->mutex, NULL);
  atomic_init(&self->references, 1);
  self->vtable.struct_size = NXMEM_ALLOCATOR_VTABLE_SIZE_MINOR0;
  self->vtable.abi_minor = 0;
  self->vtable.mechanism_id = MECHANISM_ID;
  self->vtable.device = request->device;
  self->vtable.capability_flags = NXMEM_CAP_ALLOCATOR;
  self->vtable.name = (const uint8_t*)NAME;
  self->vtable.ctx = self;
  self->vtable.allocate = eager_allocate;
  self->vtable.deallocate = eager_deallocate;
  self->vtable.retain = eager_retain;
  self->vtable.release = eager_release;
  atomic_fetch_add(&live_allocators, 1);
  *out = &self->vtable;
  return example_ok();
}

static void release_factory(void* ctx) {
  (void)ctx;
  atomic_fetch_sub(&live_factories, 1);
}

static const NxmemAllocatorFactoryVtable factory = {
    .struct_size = sizeof(NxmemAllocatorFactoryVtable),
    .abi_minor = 0,
    .name = (const uint8_t*)NAME,
    .device = {NXMEM_TIER_HOST, 0},
    .capability_flags = NXMEM_CAP_ALLOCATOR,
    .ctx = NULL,
    .open_allocator = open_allocator,
    .release = release_factory,
};

/* ---- the exports ------------------------------------------------------- */

NxmemStatus NxmemNegotiate(const NxmemNegotiateRequest* request, NxmemNegotiateResponse* response) {
  return example_negotiate(NAME, 0, 0, NXMEM_CAP_ALLOCATOR, request, response);
}

NxmemStatus NxmemCreateAllocatorFactories(const NxmemAllocatorFactoryVtable** out, uint64_t max, uint64_t* count) {
  if (out == NULL || count == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  *count = 0;
  if (max < 1) return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": no room for its one factory");
  out[0] = &factory;
  *count = 1;
  atomic_fetch_add(&live_factories, 1);
  return example_ok();
}

NxmemStatus NxmemQueryUnloadReadiness(NxmemUnloadReport* report) {
  if (report == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  memset(report, 0, sizeof *report);
  report->struct_size = sizeof *report;
  report->live_allocators = atomic_load(&live_allocators) + atomic_load(&live_factories);
  report->live_allocations = atomic_load(&live_allocations);
  return example_ok();
}
