/* conformance/tests/plugins/device_tier_plugin.c: a test double, not an
 * example. One factory, "simulated-device", offers the allocator capability
 * on tier DEVICE index 0, so the kit's MEMORY_ACCESS path (the ortmem-cts
 * control extension) can be certified end to end without a GPU.
 *
 * Like device memory, what it hands out is an address the host process must
 * never dereference: a PROT_NONE reservation, aligned as asked, which faults
 * on any access. The bytes live in a separate read-write "shadow" mapping
 * only the plugin knows, and reach the kit only through fill and read. A kit
 * suite that touches an allocation through its pointer therefore crashes
 * instead of passing on host memory by accident.
 *
 * Built three ways (conformance/tests/CMakeLists.txt):
 *   default           exports MEMORY_ACCESS (fill, read; no probe_write);
 *   NO_MEMORY_ACCESS  exports no controls, so the kit cannot read the tier
 *                     and must refuse to run it;
 *   LYING_READ        read answers every byte XOR 0xff: a control that lies,
 *                     which the kit's read-back checks must catch.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "plugin/examples/example_support.h"
#include "nxmem/nxmem_abi.h"
#include "nxmem/ortmem_cts_controls.h"

#define NAME "simulated-device"
#define MECHANISM_ID 0x73696d646576ull /* "simdev" */

typedef struct Allocator Allocator;

/* One allocation: the address the host holds and the shadow behind it. */
typedef struct Entry {
  const Allocator* owner;
  uint64_t id;
  uint8_t* device; /* PROT_NONE: never touched, by anyone */
  uint8_t* shadow;
  uint64_t bytes;  /* as requested: fill and read stay inside these */
  uint64_t length; /* page-rounded, of the reservation and of the shadow alike */
  struct Entry* next;
} Entry;

struct Allocator {
  NxmemAllocatorVtable vtable;
  atomic_uint_fast64_t references;
};

/* One table for the module, not one per allocator: the memory slots take
 * any allocator of the mechanism with an address any of them handed out.
 * The lock is held across each fill and read, so a racing deallocate cannot
 * unmap a shadow in the middle of a copy; the plugin makes no host calls. */
static pthread_mutex_t table_mutex = PTHREAD_MUTEX_INITIALIZER;
static Entry* table; /* guarded by table_mutex */

static atomic_uint_fast64_t live_allocators;
static atomic_uint_fast64_t live_allocations;
static atomic_uint_fast64_t live_factories;

static int is_power_of_two(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

static void unmap_entry(Entry* entry) {
  munmap(entry->device, entry->length);
  munmap(entry->shadow, entry->length);
  free(entry);
  atomic_fetch_sub(&live_allocations, 1);
}

static NxmemStatus check_identity(const Allocator* self, uint64_t mechanism_id, NxmemDeviceId device) {
  if (mechanism_id != MECHANISM_ID)
    return example_status(NXMEM_STATUS_WRONG_MECHANISM, NAME ": not this mechanism's allocation");
  if (device.tier != self->vtable.device.tier || device.index != self->vtable.device.index) {
    return example_status(NXMEM_STATUS_WRONG_DEVICE, NAME ": not this allocator's device");
  }
  return example_ok();
}

/* A PROT_NONE range of `length` bytes at an `align`-aligned address (both
 * whole pages, the sum checked by the caller): over-reserved by the
 * alignment's slack, which is then given back. */
static uint8_t* reserve_aligned(uint64_t length, uint64_t align, uint64_t page) {
  const uint64_t slack = align - page;
  uint8_t* base = mmap(NULL, length + slack, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return NULL;
  const uintptr_t start = ((uintptr_t)base + (align - 1)) & ~(uintptr_t)(align - 1);
  uint8_t* aligned = (uint8_t*)start;
  if (aligned > base) munmap(base, (size_t)(aligned - base));
  uint8_t* tail = aligned + length;
  if (tail < base + length + slack) munmap(tail, (size_t)(base + length + slack - tail));
  return aligned;
}

static NxmemStatus device_allocate(void* ctx, const NxmemAllocRequest* request, NxmemAllocResult* result) {
  Allocator* self = ctx;
  if (request == NULL || result == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  if (request->struct_size < sizeof(NxmemAllocRequest))
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short request");
  NxmemStatus identity = check_identity(self, request->mechanism_id, request->device);
  if (identity.code != NXMEM_STATUS_OK) return identity;
  if (!is_power_of_two(request->align))
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": alignment is not a power of two");
  if (request->allocation_id == 0) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": allocation id 0");
  const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  const uint64_t align = request->align > page ? request->align : page;
  /* Zero bytes still get a distinct address: one page of its own. */
  const uint64_t wanted = request->bytes == 0 ? 1 : request->bytes;
  if (wanted > UINT64_MAX - (align - 1)) {
    return example_statusf(NXMEM_STATUS_INVALID_ARGUMENT,
                           NAME ": %llu bytes overflow when rounded up to alignment %llu",
                           (unsigned long long)request->bytes, (unsigned long long)request->align);
  }
  const uint64_t length = (wanted + page - 1) & ~(page - 1);
  Entry* entry = malloc(sizeof *entry);
  if (entry == NULL) return example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory for the table");
  entry->shadow = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  entry->device = entry->shadow == MAP_FAILED ? NULL : reserve_aligned(length, align, page);
  if (entry->device == NULL) {
    if (entry->shadow != MAP_FAILED) munmap(entry->shadow, length);
    free(entry);
    return example_statusf(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": cannot map %llu bytes at alignment %llu",
                           (unsigned long long)request->bytes, (unsigned long long)request->align);
  }
  entry->owner = self;
  entry->id = request->allocation_id;
  entry->bytes = request->bytes;
  entry->length = length;
  pthread_mutex_lock(&table_mutex);
  entry->next = table;
  table = entry;
  pthread_mutex_unlock(&table_mutex);
  atomic_fetch_add(&live_allocations, 1);
  memset(result, 0, sizeof *result);
  result->struct_size = sizeof *result;
  result->ptr = entry->device;
  result->owned_bytes = request->bytes;
  result->mapped_bytes = request->bytes;
  return example_ok();
}

static NxmemStatus device_deallocate(void* ctx, const NxmemAllocation* allocation, uint64_t* unmapped_out) {
  Allocator* self = ctx;
  if (allocation == NULL || unmapped_out == NULL)
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  NxmemStatus identity = check_identity(self, allocation->mechanism_id, allocation->device);
  if (identity.code != NXMEM_STATUS_OK) return identity;
  pthread_mutex_lock(&table_mutex);
  Entry** link = &table;
  while (*link != NULL && ((*link)->owner != self || (*link)->id != allocation->allocation_id ||
                           (*link)->device != allocation->ptr || (*link)->bytes != allocation->bytes)) {
    link = &(*link)->next;
  }
  Entry* found = *link;
  if (found != NULL) *link = found->next;
  pthread_mutex_unlock(&table_mutex);
  if (found == NULL)
    return example_status(NXMEM_STATUS_UNKNOWN_ALLOCATION, NAME ": no live allocation with this id, address and size");
  /* The shadow's pages go, at least `bytes` of them; the reservation held none. */
  *unmapped_out = found->bytes;
  unmap_entry(found);
  return example_ok();
}

static void device_retain(void* ctx) { atomic_fetch_add(&((Allocator*)ctx)->references, 1); }

static void device_release(void* ctx) {
  Allocator* self = ctx;
  if (atomic_fetch_sub(&self->references, 1) != 1) return;
  /* The host releases every allocation first; what it left is freed so the
   * module can be unloaded. */
  pthread_mutex_lock(&table_mutex);
  Entry* left = NULL;
  for (Entry** link = &table; *link != NULL;) {
    Entry* entry = *link;
    if (entry->owner != self) {
      link = &entry->next;
      continue;
    }
    *link = entry->next;
    entry->next = left;
    left = entry;
  }
  pthread_mutex_unlock(&table_mutex);
  while (left != NULL) {
    Entry* next = left->next;
    unmap_entry(left);
    left = next;
  }
  free(self);
  atomic_fetch_sub(&live_allocators, 1);
}

/* ---- the control extension ---------------------------------------------- */

#ifndef NO_MEMORY_ACCESS

/* The live entry whose requested bytes hold [address, address + bytes), with
 * table_mutex held. */
static Entry* holding_locked(const uint8_t* address, uint64_t bytes) {
  for (Entry* entry = table; entry != NULL; entry = entry->next) {
    if (address < entry->device || address > entry->device + entry->bytes) continue;
    const uint64_t offset = (uint64_t)(address - entry->device);
    if (bytes <= entry->bytes - offset) return entry;
  }
  return NULL;
}

static NxmemStatus outside(const uint8_t* address, uint64_t bytes) {
  return example_statusf(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": [%p, +%llu) is not inside one live allocation",
                         (const void*)address, (unsigned long long)bytes);
}

static NxmemStatus device_fill(void* ctx, uint8_t* address, uint64_t bytes, uint8_t value) {
  (void)ctx;
  pthread_mutex_lock(&table_mutex);
  Entry* entry = holding_locked(address, bytes);
  if (entry != NULL) memset(entry->shadow + (address - entry->device), value, bytes);
  pthread_mutex_unlock(&table_mutex);
  return entry != NULL ? example_ok() : outside(address, bytes);
}

static NxmemStatus device_read(void* ctx, const uint8_t* address, uint8_t* out, uint64_t bytes) {
  (void)ctx;
  if (out == NULL && bytes != 0) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null output buffer");
  pthread_mutex_lock(&table_mutex);
  Entry* entry = holding_locked(address, bytes);
  if (entry != NULL && bytes != 0) memcpy(out, entry->shadow + (address - entry->device), bytes);
  pthread_mutex_unlock(&table_mutex);
  if (entry == NULL) return outside(address, bytes);
#ifdef LYING_READ
  for (uint64_t i = 0; i < bytes; ++i) out[i] ^= 0xffu;
#endif
  return example_ok();
}

static const OrtmemCtsControls controls = {
    .struct_size = sizeof(OrtmemCtsControls),
    .version = ORTMEM_CTS_CONTROLS_VERSION,
    .mechanism_id = MECHANISM_ID,
    .controls = ORTMEM_CTS_CONTROL_MEMORY_ACCESS,
    .fill = device_fill,
    .read = device_read,
};

NxmemStatus OrtmemCtsPluginControls(uint32_t kit_version, uint64_t mechanism_id, const OrtmemCtsControls** out) {
  if (out == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  *out = NULL;
  if (kit_version < 1) return example_status(NXMEM_STATUS_VERSION_MISMATCH, NAME ": offers controls version 1");
  if (mechanism_id != MECHANISM_ID)
    return example_status(NXMEM_STATUS_NOT_IMPLEMENTED, NAME ": not this plugin's mechanism");
  *out = &controls;
  return example_ok();
}

#endif /* NO_MEMORY_ACCESS */

/* ---- the factory ------------------------------------------------------- */

static NxmemStatus open_allocator(void* ctx, const NxmemOpenRequest* request, const NxmemAllocatorVtable** out) {
  (void)ctx;
  if (request == NULL || out == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  if (request->struct_size < sizeof(NxmemOpenRequest))
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short open request");
  if (request->device.tier != NXMEM_TIER_DEVICE || request->device.index != 0) {
    return example_status(NXMEM_STATUS_WRONG_DEVICE, NAME ": device 0 only");
  }
  if ((request->required_capability_flags & ~NXMEM_CAP_ALLOCATOR) != 0) {
    return example_status(NXMEM_STATUS_UNSUPPORTED_CAPABILITY, NAME ": offers the allocator capability only");
  }
  Allocator* self = calloc(1, sizeof *self);
  if (self == NULL) return example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory for an allocator");
  atomic_init(&self->references, 1);
  /* The vtable speaks the negotiated minor; release_allocation stays NULL,
   * as STRUCTURED_RELEASE is not offered. */
  self->vtable.abi_minor = request->abi_minor >= 1 ? 1 : 0;
  self->vtable.struct_size =
      self->vtable.abi_minor == 0 ? NXMEM_ALLOCATOR_VTABLE_SIZE_MINOR0 : sizeof(NxmemAllocatorVtable);
  self->vtable.mechanism_id = MECHANISM_ID;
  self->vtable.device = request->device;
  self->vtable.capability_flags = NXMEM_CAP_ALLOCATOR;
  self->vtable.name = (const uint8_t*)NAME;
  self->vtable.ctx = self;
  self->vtable.allocate = device_allocate;
  self->vtable.deallocate = device_deallocate;
  self->vtable.retain = device_retain;
  self->vtable.release = device_release;
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
    .abi_minor = 1,
    .name = (const uint8_t*)NAME,
    .device = {NXMEM_TIER_DEVICE, 0},
    .capability_flags = NXMEM_CAP_ALLOCATOR,
    .ctx = NULL,
    .open_allocator = open_allocator,
    .release = release_factory,
};

/* ---- the exports ------------------------------------------------------- */

NxmemStatus NxmemNegotiate(const NxmemNegotiateRequest* request, NxmemNegotiateResponse* response) {
  return example_negotiate(NAME, 0, 1, NXMEM_CAP_ALLOCATOR, request, response);
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
