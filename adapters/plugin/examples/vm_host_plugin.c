/* adapters/plugin/examples/vm_host_plugin.c: an nxmem plugin over the
 * operating system's virtual memory, at ABI minor 1. One factory, "vm-host",
 * offers the allocator with virtual backing, shared mapping, deferred release
 * and the structured release.
 *
 * An allocation is a reservation of address space (mmap PROT_NONE) carved
 * into granules of one page. A granule is unmapped, committed (private
 * read-write memory) or shared (a read-only mapping of a prefix's memfd).
 * Committed bytes are kept as byte ranges as well as granules, because two
 * ranges that share a granule must keep it mapped until both are gone; the
 * bytes a decommit or release reports are the granules it really unmapped,
 * since a governor credits exactly that number back.
 *
 * A shared prefix is a memfd, mapped read-write once for its owner (the
 * handle's device_ptr) and read-only with MAP_FIXED into each target. The
 * kernel keeps the pages while the owner window or any mapping exists, so
 * dropping the last handle reference only closes the owner's side; the
 * record lives on while mappings remain, for the unload report.
 *
 * Every call that names an allocation is checked in the ABI's order: the
 * mechanism, then the device, then whether this allocator holds that id at
 * that address, size and alignment. A refusal changes nothing: commits and
 * decommits undo their own system calls, and the bookkeeping they need is
 * allocated before the first call is made.
 *
 * One mutex per allocator guards its tables. It is held across mmap,
 * mprotect and madvise where a change must be atomic with the tables (those
 * calls do not block indefinitely); allocate and release do their large
 * mapping work on a region nobody else can reach.
 *
 * Deferred release is the one place this plugin calls the host: each queued
 * ticket's release is performed, and its release_completed delivered, by
 * whichever thread holds the allocator's single "deliverer" role (its worker
 * thread, a caller of drain_releases, or the final release), never with the
 * mutex held, so the host may call back into the allocator from the
 * completion.
 *
 * It also exports the ortmem-cts control extension
 * (adapters/plugin/include/nxmem/ortmem_cts_controls.h), so the kit can certify the parts
 * of the contract the ABI gives a host no way to drive. A plugin over the
 * system's memory has no device work of its own, no way to lose its device
 * and no system call that fails on cue, so the controls stand in for them
 * exactly where the real event would strike: a fence holds back the tickets
 * enqueued behind the work it marks, a lost device quarantines the pending
 * tickets and keeps their memory mapped (a driver frees a lost context's
 * memory only when the context goes, here the allocator's final release),
 * and an injected fault fails one granule's system call in the middle of
 * the real run of calls, so the code that rolls back or reports a partial
 * release is the same code a kernel refusal would reach. None of it costs
 * the runtime anything: with nothing armed every path makes the calls it
 * always made.
 */
#define _GNU_SOURCE /* memfd_create, MAP_ANONYMOUS, MAP_NORESERVE, madvise */

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "example_support.h"
#include "nxmem/nxmem_abi.h"
#include "nxmem/ortmem_cts_controls.h"

#define MECHANISM_ID 0x766d2d686f7374ull /* "vm-host" */
#define NAME "vm-host"

#define PLUGIN_CAPS                                                                                          \
  (NXMEM_CAP_ALLOCATOR | NXMEM_CAP_VIRTUAL_BACKING | NXMEM_CAP_SHARED_MAPPING | NXMEM_CAP_DEFERRED_RELEASE | \
   NXMEM_CAP_STRUCTURED_RELEASE)

static int failed(NxmemStatus s) { return s.code != NXMEM_STATUS_OK; }

/* strerror's buffer is shared between threads; the GNU strerror_r is not. */
static const char* error_text(int error, char* buffer, size_t size) {
#if defined(__GLIBC__)
  return strerror_r(error, buffer, size);
#else
  if (strerror_r(error, buffer, size) != 0) snprintf(buffer, size, "errno %d", error);
  return buffer;
#endif
}

/* A failed system call is the host running out when the kernel says so, and
 * a fault of the mechanism otherwise. */
static uint32_t code_of_errno(int error) {
  return error == ENOMEM || error == EAGAIN ? NXMEM_STATUS_OUT_OF_MEMORY : NXMEM_STATUS_DEVICE_ERROR;
}

static int is_power_of_two(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

/* ---- committed byte ranges --------------------------------------------- */

/* Disjoint, non-touching, sorted half-open ranges. Every change needs at most
 * one more slot than the set has, and that slot is reserved before the first
 * system call of the change, so updating the set after the calls cannot fail. */
typedef struct Span {
  uint64_t begin;
  uint64_t end;
} Span;

typedef struct SpanSet {
  Span* items;
  size_t count;
  size_t capacity;
} SpanSet;

static int spans_reserve_one(SpanSet* set) {
  if (set->count < set->capacity) return 1;
  const size_t capacity = set->capacity == 0 ? 4 : set->capacity * 2;
  Span* items = realloc(set->items, capacity * sizeof *items);
  if (items == NULL) return 0;
  set->items = items;
  set->capacity = capacity;
  return 1;
}

/* Replaces items [first, last) with `count` new ones. */
static void spans_splice(SpanSet* set, size_t first, size_t last, const Span* with, size_t count) {
  memmove(set->items + first + count, set->items + last, (set->count - last) * sizeof *set->items);
  memcpy(set->items + first, with, count * sizeof *with);
  set->count = set->count - (last - first) + count;
}

static void spans_add(SpanSet* set, uint64_t begin, uint64_t end) {
  if (begin >= end) return;
  size_t first = 0;
  while (first < set->count && set->items[first].end < begin) ++first;
  size_t last = first;
  while (last < set->count && set->items[last].begin <= end) ++last;
  Span merged = {begin, end};
  if (first < last) {
    if (set->items[first].begin < merged.begin) merged.begin = set->items[first].begin;
    if (set->items[last - 1].end > merged.end) merged.end = set->items[last - 1].end;
  }
  spans_splice(set, first, last, &merged, 1);
}

static void spans_remove(SpanSet* set, uint64_t begin, uint64_t end) {
  if (begin >= end) return;
  size_t first = 0;
  while (first < set->count && set->items[first].end <= begin) ++first;
  size_t last = first;
  while (last < set->count && set->items[last].begin < end) ++last;
  if (first == last) return;
  Span pieces[2];
  size_t count = 0;
  if (set->items[first].begin < begin) pieces[count++] = (Span){set->items[first].begin, begin};
  if (set->items[last - 1].end > end) pieces[count++] = (Span){end, set->items[last - 1].end};
  spans_splice(set, first, last, pieces, count);
}

static int spans_intersect(const SpanSet* set, uint64_t begin, uint64_t end) {
  if (begin >= end) return 0;
  for (size_t i = 0; i < set->count; ++i) {
    if (set->items[i].begin < end && set->items[i].end > begin) return 1;
  }
  return 0;
}

/* ---- prefixes, regions, allocators --------------------------------------- */

enum { GRANULE_UNMAPPED = 0, GRANULE_COMMITTED = 1, GRANULE_SHARED = 2, GRANULE_COMMITTING = 3 };

typedef struct Prefix {
  uint64_t handle;
  int fd;          /* -1 once the last reference is gone */
  uint8_t* window; /* the owner's read-write view; NULL with fd */
  uint64_t mapped_bytes;
  uint64_t requested_bytes;
  uint64_t references; /* handle references */
  uint64_t mappings;   /* mappings into live regions */
  struct Prefix* next;
} Prefix;

typedef struct Region {
  uint64_t id;
  uint8_t* base;
  uint64_t bytes;
  uint64_t align;
  uint64_t granule_count; /* covers max(bytes, 1), so zero bytes still own an address */
  uint8_t* granules;
  SpanSet committed;
  Prefix** prefixes; /* one entry per mapping in this region */
  size_t prefix_count;
  size_t prefix_capacity;
  struct Region* next; /* hash chain */
} Region;

/* A deferred release: its region is out of the table (no call can reach it)
 * but still mapped, until the deliverer takes it. */
typedef struct Queued {
  uint64_t ticket;
  uint64_t allocation_id;
  uint64_t bytes;
  Region* region;
  struct Queued* next;
} Queued;

/* Where a worker that closed its own allocator waits to be joined: it
 * outlives the allocator, so it is its own allocation. */
typedef struct Exited {
  pthread_t thread;
  struct Exited* next;
} Exited;

typedef struct Allocator {
  NxmemAllocatorVtable vtable;
  NxmemVirtualBackingVtable virtual_backing;
  NxmemSharedMappingVtable shared_mapping;
  uint64_t granule;
  /* Copied at open and never written again, so the deliverer reads it
   * without the mutex; release_completed is NULL when the host gave none. */
  NxmemHostCallbacks host;
  pthread_mutex_t mutex;
  Region** buckets; /* guarded by mutex, as is everything below */
  size_t bucket_count;
  size_t region_count;
  Prefix* prefixes;
  /* Regions out of the table for good but still mapped: a release that
   * failed part way, and every ticket a lost device quarantined. The host
   * never names them again, and keeping them mapped is what keeps their
   * addresses from being reissued; they stay in live_allocations until the
   * final release unmaps them. Chained through `next`. */
  Region* retired;
  /* Deferred release. The queue holds tickets nobody has taken; at most one
   * thread (the deliverer) has taken one and is releasing and reporting it.
   * Taking only the head, and only while nobody delivers, is what keeps the
   * completions in enqueue order and each exactly once. */
  Queued* queue_head;
  Queued* queue_tail;
  uint64_t queued;            /* tickets in the queue */
  uint64_t last_ticket;       /* the last ticket issued; tickets run from 1 */
  uint64_t delivered_through; /* every ticket up to this one has been reported */
  int delivering;
  pthread_t deliverer; /* meaningful while delivering */
  /* The queue's controls (ortmem-cts). Fences are only ever set on tickets
   * enqueued while work is outstanding and all pass at once, so the fenced
   * tickets are always the queue's tail from `first_fenced` on: a ticket
   * needs no mark of its own, and the head is fenced exactly when it is at
   * or past it (0: none is). */
  int work_outstanding;
  uint64_t first_fenced;
  /* Set by open_queue: the kit drives this queue, so tickets retire only in
   * its calls (drain_releases, lose_device, the final release), never on
   * the worker's own schedule, and every count it reads between two calls
   * holds still. */
  int kit_driven;
  int queue_closed;
  int device_lost;
  uint64_t capacity; /* tickets pending at most; 0 is unbounded */
  /* Per fault point, the armed step counted down from 1 (the very next); 0
   * is disarmed. */
  uint64_t faults[ORTMEM_CTS_FAULT_PREFIX_MAP + 1];
  /* drain_releases calls under way. While there are any, the worker takes
   * no two tickets in a row: it would otherwise take each next one before a
   * waiting drain could (it holds the mutex from one delivery to the next),
   * and drains would only ever watch it; it stands back no longer than that,
   * so drains that keep coming cannot starve it either. */
  unsigned drainers;
  pthread_cond_t changed; /* broadcast on every change a waiter could want */
  int worker_started;
  int stopping; /* the worker is to exit: the final release has emptied the queue */
  pthread_t worker;
  Exited* exit_record; /* the worker's, made with it */
  /* The final release came from inside a completion `closer` was delivering;
   * that delivering frame, which is about to touch the allocator again,
   * finishes the close in its place. */
  int closing;
  pthread_t closer;
  atomic_uint_fast64_t references;
} Allocator;

static atomic_uint_fast64_t live_allocators;
static atomic_uint_fast64_t live_allocations;
static atomic_uint_fast64_t live_views;
static atomic_uint_fast64_t live_capabilities;
static atomic_uint_fast64_t live_factories;
/* Tickets whose completion has not yet returned from the host, across
 * allocators: each still holds the module (its code runs again) and the
 * host's callback table. */
static atomic_uint_fast64_t queued_releases;
/* Workers that closed their own allocator and have yet to be joined; the
 * unload report joins them, since a module must not go while one runs. */
static pthread_mutex_t exited_mutex = PTHREAD_MUTEX_INITIALIZER;
static Exited* exited_workers;
/* Handles are unique across allocators, so one allocator never mistakes
 * another's prefix for its own. */
static atomic_uint_fast64_t next_handle = 1;
static atomic_uint negotiated_minor = 1;

static uint64_t round_up(uint64_t value, uint64_t unit) { return (value + unit - 1) & ~(unit - 1); }

/* How many of the next `steps` unit steps (granules) behind a fault point
 * go ahead before the armed one fails; `steps` when it lies further on.
 * Counted only where the step's system call is about to be made, so a call
 * refused beforehand takes none, and disarmed once it fires: a fault fails
 * only the step it was armed for. Caller holds the mutex. */
static uint64_t steps_before_fault_locked(Allocator* self, uint32_t point, uint64_t steps) {
  uint64_t* armed = &self->faults[point];
  if (*armed == 0) return steps;
  if (*armed > steps) {
    *armed -= steps;
    return steps;
  }
  const uint64_t before = *armed - 1;
  *armed = 0;
  return before;
}

/* For a caller on a region nobody else can reach, which holds no lock. */
static uint64_t steps_before_fault(Allocator* self, uint32_t point, uint64_t steps) {
  pthread_mutex_lock(&self->mutex);
  const uint64_t before = steps_before_fault_locked(self, point, steps);
  pthread_mutex_unlock(&self->mutex);
  return before;
}

static NxmemStatus check_identity(const Allocator* self, uint64_t mechanism_id, NxmemDeviceId device) {
  if (mechanism_id != MECHANISM_ID) return example_status(NXMEM_STATUS_WRONG_MECHANISM, NAME ": not this mechanism's");
  if (device.tier != self->vtable.device.tier || device.index != self->vtable.device.index) {
    return example_status(NXMEM_STATUS_WRONG_DEVICE, NAME ": not this allocator's device");
  }
  return example_ok();
}

static size_t bucket_of(uint64_t id, size_t bucket_count) {
  return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 32) & (bucket_count - 1);
}

/* Caller holds the mutex. */
static Region* find_region(const Allocator* self, const NxmemAllocation* allocation) {
  for (Region* region = self->buckets[bucket_of(allocation->allocation_id, self->bucket_count)]; region != NULL;
       region = region->next) {
    if (region->id != allocation->allocation_id) continue;
    if (region->base != allocation->ptr || region->bytes != allocation->bytes || region->align != allocation->align) {
      return NULL;
    }
    return region;
  }
  return NULL;
}

/* The identity checks in the ABI's order; caller holds the mutex. */
static NxmemStatus lookup(const Allocator* self, const NxmemAllocation* allocation, Region** out) {
  NxmemStatus identity = check_identity(self, allocation->mechanism_id, allocation->device);
  if (failed(identity)) return identity;
  *out = find_region(self, allocation);
  if (*out == NULL) {
    return example_statusf(NXMEM_STATUS_UNKNOWN_ALLOCATION,
                           NAME ": no live allocation %llu of %llu bytes at alignment %llu at this address",
                           (unsigned long long)allocation->allocation_id, (unsigned long long)allocation->bytes,
                           (unsigned long long)allocation->align);
  }
  return example_ok();
}

/* Caller holds the mutex. Growing is best effort: a longer chain is slower,
 * never wrong, so running out of memory here refuses nothing. */
static void grow_buckets(Allocator* self) {
  if (self->region_count < self->bucket_count * 2) return;
  const size_t count = self->bucket_count * 2;
  Region** buckets = calloc(count, sizeof *buckets);
  if (buckets == NULL) return;
  for (size_t i = 0; i < self->bucket_count; ++i) {
    for (Region* region = self->buckets[i]; region != NULL;) {
      Region* next = region->next;
      const size_t b = bucket_of(region->id, count);
      region->next = buckets[b];
      buckets[b] = region;
      region = next;
    }
  }
  free(self->buckets);
  self->buckets = buckets;
  self->bucket_count = count;
}

/* Caller holds the mutex. 0 when the id is already live. */
static int insert_region(Allocator* self, Region* region) {
  const size_t b = bucket_of(region->id, self->bucket_count);
  for (const Region* other = self->buckets[b]; other != NULL; other = other->next) {
    if (other->id == region->id) return 0;
  }
  region->next = self->buckets[b];
  self->buckets[b] = region;
  ++self->region_count;
  grow_buckets(self);
  return 1;
}

/* Caller holds the mutex. */
static void unlink_region(Allocator* self, Region* region) {
  Region** link = &self->buckets[bucket_of(region->id, self->bucket_count)];
  while (*link != region) link = &(*link)->next;
  *link = region->next;
  --self->region_count;
}

static uint64_t mapped_granules(const Region* region) {
  uint64_t count = 0;
  for (uint64_t g = 0; g < region->granule_count; ++g) count += region->granules[g] != GRANULE_UNMAPPED;
  return count;
}

/* Closes the owner's side of a prefix whose last reference went. */
static void close_prefix(Prefix* prefix) {
  munmap(prefix->window, prefix->mapped_bytes);
  close(prefix->fd);
  prefix->window = NULL;
  prefix->fd = -1;
  atomic_fetch_sub(&live_capabilities, 1);
}

/* Caller holds the mutex. The record goes once neither a reference nor a
 * mapping holds the prefix. */
static void forget_prefix_if_unheld(Allocator* self, Prefix* prefix) {
  if (prefix->references != 0 || prefix->mappings != 0) return;
  Prefix** link = &self->prefixes;
  while (*link != prefix) link = &(*link)->next;
  *link = prefix->next;
  free(prefix);
}

/* Caller holds the mutex; the region's mappings are already gone. */
static void detach_prefixes(Allocator* self, Region* region) {
  for (size_t i = 0; i < region->prefix_count; ++i) {
    Prefix* prefix = region->prefixes[i];
    --prefix->mappings;
    atomic_fetch_sub(&live_views, 1);
    forget_prefix_if_unheld(self, prefix);
  }
  region->prefix_count = 0;
}

static void free_region(Region* region) {
  free(region->granules);
  free(region->committed.items);
  free(region->prefixes);
  free(region);
}

static uint8_t* granule_at(const Region* region, uint64_t g, uint64_t granule) { return region->base + g * granule; }

/* Commits [offset, offset + length) of a region the caller may change (it
 * holds the mutex, `locked`, or nobody else can reach the region yet). Only
 * unmapped granules are mapped, a run at a time; a failure unmaps what this
 * call mapped. The range is inside the region. */
static NxmemStatus commit_locked(Allocator* self, Region* region, uint64_t offset, uint64_t length, int locked) {
  const uint64_t granule = self->granule;
  if (length == 0) return example_ok();
  const uint64_t first = offset / granule;
  const uint64_t last = (offset + length - 1) / granule;
  for (uint64_t g = first; g <= last; ++g) {
    if (region->granules[g] == GRANULE_SHARED) {
      return example_statusf(NXMEM_STATUS_INVALID_ARGUMENT,
                             NAME ": range %llu+%llu overlaps a read-only shared prefix mapping; nothing was changed",
                             (unsigned long long)offset, (unsigned long long)length);
    }
  }
  if (!spans_reserve_one(&region->committed)) {
    return example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory for the committed-range record");
  }
  for (uint64_t g = first; g <= last;) {
    if (region->granules[g] != GRANULE_UNMAPPED) {
      ++g;
      continue;
    }
    uint64_t end = g;
    while (end <= last && region->granules[end] == GRANULE_UNMAPPED) ++end;
    /* An armed fault cuts the run at its granule: the granules before it
     * are really committed, as a call per granule would have, and then the
     * failure has all of them to take back. */
    const uint64_t run = end - g;
    const uint64_t fine = locked ? steps_before_fault_locked(self, ORTMEM_CTS_FAULT_COMMIT, run)
                                 : steps_before_fault(self, ORTMEM_CTS_FAULT_COMMIT, run);
    int error = 0;
    uint64_t refused = fine * granule;
    if (fine != 0 && mprotect(granule_at(region, g, granule), (size_t)(fine * granule), PROT_READ | PROT_WRITE) != 0) {
      error = errno;
      /* A failed mprotect may have changed part of its run: that run goes
       * back too, with every run this call mapped before it. */
      mprotect(granule_at(region, g, granule), (size_t)(fine * granule), PROT_NONE);
    } else {
      for (uint64_t k = g; k < g + fine; ++k) region->granules[k] = GRANULE_COMMITTING;
      if (fine < run) {
        error = ENOMEM; /* the injected failure: what mprotect says when the kernel runs out */
        refused = granule;
      }
    }
    if (error != 0) {
      for (uint64_t back = first; back < end; ++back) {
        if (region->granules[back] != GRANULE_COMMITTING) continue;
        mprotect(granule_at(region, back, granule), granule, PROT_NONE);
        region->granules[back] = GRANULE_UNMAPPED;
      }
      char text[128];
      return example_statusf(code_of_errno(error),
                             NAME ": mprotect could not commit %llu bytes (%s); nothing was changed",
                             (unsigned long long)refused, error_text(error, text, sizeof text));
    }
    g = end;
  }
  for (uint64_t g = first; g <= last; ++g) {
    if (region->granules[g] == GRANULE_COMMITTING) region->granules[g] = GRANULE_COMMITTED;
  }
  spans_add(&region->committed, offset, offset + length);
  return example_ok();
}

static int range_inside(uint64_t offset, uint64_t length, uint64_t bytes) {
  return offset <= bytes && length <= bytes - offset;
}

static NxmemStatus outside(uint64_t offset, uint64_t length, uint64_t bytes) {
  return example_statusf(NXMEM_STATUS_INVALID_ARGUMENT,
                         NAME ": range %llu+%llu lies outside the allocation of %llu bytes; nothing was changed",
                         (unsigned long long)offset, (unsigned long long)length, (unsigned long long)bytes);
}

/* ---- the allocator ------------------------------------------------------ */

/* Reserves and commits a new allocation. Its mapping work happens before the
 * region is in the table, so no lock is held across it. */
static NxmemStatus make_allocation(Allocator* self, const NxmemAllocRequest* request, const NxmemByteRange* ranges,
                                   uint64_t range_count, NxmemAllocResult* result) {
  if (request->struct_size < sizeof(NxmemAllocRequest))
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short request");
  NxmemStatus identity = check_identity(self, request->mechanism_id, request->device);
  if (failed(identity)) return identity;
  const uint64_t bytes = request->bytes;
  const uint64_t align = request->align;
  if (!is_power_of_two(align)) {
    return example_statusf(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": alignment %llu is not a power of two",
                           (unsigned long long)align);
  }
  if (request->allocation_id == 0) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": allocation id 0");
  const uint64_t granule = self->granule;
  const uint64_t boundary = align > granule ? align : granule;
  const uint64_t wanted = bytes == 0 ? 1 : bytes;
  /* The reservation is the span plus room to slide it to the boundary. */
  int overflows = wanted > UINT64_MAX - (granule - 1) || round_up(wanted, granule) > UINT64_MAX - boundary;
#if SIZE_MAX < UINT64_MAX
  if (!overflows && round_up(wanted, granule) + boundary - granule > (uint64_t)SIZE_MAX) overflows = 1;
#endif
  if (overflows) {
    return example_statusf(
        NXMEM_STATUS_INVALID_ARGUMENT,
        NAME ": the size %llu overflows when rounded up to whole granules of %llu bytes at alignment %llu",
        (unsigned long long)bytes, (unsigned long long)granule, (unsigned long long)align);
  }
  const uint64_t span = round_up(wanted, granule);
  const uint64_t reserved = span + boundary - granule;
  if (range_count != 0 && ranges == NULL) {
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": committed_ranges is NULL with a non-zero count");
  }
  for (uint64_t i = 0; i < range_count; ++i) {
    if (!range_inside(ranges[i].offset, ranges[i].bytes, bytes)) {
      return example_statusf(
          NXMEM_STATUS_INVALID_ARGUMENT, NAME ": committed range %llu+%llu lies outside the allocation of %llu bytes",
          (unsigned long long)ranges[i].offset, (unsigned long long)ranges[i].bytes, (unsigned long long)bytes);
    }
  }

  Region* region = calloc(1, sizeof *region);
  if (region == NULL) return example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory for the allocation's record");
  void* raw = mmap(NULL, (size_t)reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) {
    const int error = errno;
    free(region);
    char text[128];
    return example_statusf(code_of_errno(error), NAME ": mmap could not reserve %llu bytes of address space: %s",
                           (unsigned long long)reserved, error_text(error, text, sizeof text));
  }
  /* Trim both ends back to the aligned span. */
  const uintptr_t start = (uintptr_t)raw;
  const uintptr_t aligned = (start + (uintptr_t)boundary - 1) & ~((uintptr_t)boundary - 1);
  if (aligned > start) munmap(raw, aligned - start);
  if (start + reserved > aligned + span) munmap((void*)(aligned + span), start + reserved - (aligned + span));
  region->id = request->allocation_id;
  region->base = (uint8_t*)aligned;
  region->bytes = bytes;
  region->align = align;
  region->granule_count = span / granule;
  region->granules = calloc((size_t)region->granule_count, 1);
  NxmemStatus outcome = example_ok();
  if (region->granules == NULL)
    outcome = example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory for the granule map");
  for (uint64_t i = 0; i < range_count && !failed(outcome); ++i) {
    outcome = commit_locked(self, region, ranges[i].offset, ranges[i].bytes, 0);
  }
  /* Counted before the region is reachable: from then on it is the table's. */
  const uint64_t mapped = failed(outcome) ? 0 : mapped_granules(region) * granule;
  if (!failed(outcome)) {
    pthread_mutex_lock(&self->mutex);
    const int inserted = insert_region(self, region);
    if (inserted) atomic_fetch_add(&live_allocations, 1);
    pthread_mutex_unlock(&self->mutex);
    if (!inserted) {
      outcome = example_statusf(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": allocation id %llu is already live",
                                (unsigned long long)request->allocation_id);
    }
  }
  if (failed(outcome)) {
    munmap(region->base, (size_t)span);
    free_region(region);
    return outcome;
  }
  memset(result, 0, sizeof *result);
  result->struct_size = sizeof *result;
  result->ptr = (uint8_t*)aligned;
  result->owned_bytes = mapped;
  result->mapped_bytes = mapped;
  return example_ok();
}

static NxmemStatus vm_allocate(void* ctx, const NxmemAllocRequest* request, NxmemAllocResult* result) {
  if (request == NULL || result == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  if (request->struct_size < sizeof(NxmemAllocRequest))
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short request");
  /* An ordinary allocation is usable throughout: all of it is committed. */
  const NxmemByteRange whole = {0, request->bytes};
  return make_allocation(ctx, request, &whole, request->bytes == 0 ? 0 : 1, result);
}

/* Caller holds the mutex. */
static void retire_region_locked(Allocator* self, Region* region) {
  region->next = self->retired;
  self->retired = region;
}

/* Ends an allocation the caller has taken out of the table (so nobody else
 * reaches it while it is unmapped), and says how in `outcome`. Every mapped
 * granule (committed or shared) goes with the reservation in one munmap, so
 * a failure has changed nothing (FAILED) and the region goes back in the
 * table. Its id cannot have been reissued meanwhile, even across a deferred
 * release's wait: the host never reuses an id.
 *
 * An armed RELEASE_UNMAP fault makes it the release of a driver that unmaps
 * granule by granule and fails at one: the mapped granules before it go, a
 * run at a time cut off at the failing one, by mapping a fresh reservation
 * over them (a munmap would hand their addresses back to the kernel, which
 * may give them to anyone before the allocation's own final unmap). Failing
 * at the first granule still changed nothing; after any other, the release
 * is QUARANTINED with what it did unmap and what stays, and the region is
 * retired, mapped, so its address is never reissued. */
static void release_taken(Allocator* self, Region* region, NxmemReleaseOutcome* outcome) {
  const uint64_t granule = self->granule;
  const uint64_t bytes = region->bytes;
  const uint64_t mapped = mapped_granules(region);
  const uint64_t fine = steps_before_fault(self, ORTMEM_CTS_FAULT_RELEASE_UNMAP, mapped);
  memset(outcome, 0, sizeof *outcome);
  outcome->struct_size = sizeof *outcome;
  char text[128];
  int error = 0;
  uint64_t unmapped = 0; /* granules */
  if (fine == mapped) {
    if (munmap(region->base, (size_t)(region->granule_count * granule)) == 0) {
      pthread_mutex_lock(&self->mutex);
      detach_prefixes(self, region);
      pthread_mutex_unlock(&self->mutex);
      free_region(region);
      atomic_fetch_sub(&live_allocations, 1);
      outcome->state = NXMEM_RELEASE_COMPLETE;
      outcome->allocation_bytes = bytes;
      outcome->unmapped_bytes = mapped * granule;
      return;
    }
    error = errno;
  } else {
    for (uint64_t g = 0; g < region->granule_count && unmapped < fine;) {
      if (region->granules[g] == GRANULE_UNMAPPED) {
        ++g;
        continue;
      }
      uint64_t end = g;
      while (end < region->granule_count && region->granules[end] != GRANULE_UNMAPPED && unmapped + (end - g) < fine) {
        ++end;
      }
      if (mmap(granule_at(region, g, granule), (size_t)((end - g) * granule), PROT_NONE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED) {
        error = errno;
        break;
      }
      for (uint64_t k = g; k < end; ++k) region->granules[k] = GRANULE_UNMAPPED;
      unmapped += end - g;
      g = end;
    }
    if (error == 0) error = ENOMEM; /* the injected failure: what munmap says when splitting a mapping runs out */
  }
  if (unmapped == 0) {
    pthread_mutex_lock(&self->mutex);
    insert_region(self, region);
    pthread_mutex_unlock(&self->mutex);
    outcome->state = NXMEM_RELEASE_FAILED;
    outcome->failure =
        example_statusf(code_of_errno(error), NAME ": munmap of the allocation failed (%s); nothing was changed",
                        error_text(error, text, sizeof text));
    return;
  }
  /* The mappings into it stay counted as views until the final release
   * unmaps the rest: the total only errs high. */
  pthread_mutex_lock(&self->mutex);
  retire_region_locked(self, region);
  pthread_mutex_unlock(&self->mutex);
  outcome->state = NXMEM_RELEASE_QUARANTINED;
  outcome->allocation_bytes = bytes;
  outcome->unmapped_bytes = unmapped * granule;
  outcome->residual_owned_bytes = (mapped - unmapped) * granule;
  outcome->failure = example_statusf(code_of_errno(error),
                                     NAME
                                     ": munmap failed (%s) after %llu of the allocation's %llu mapped bytes were "
                                     "unmapped; the rest stays mapped and the address is never reissued",
                                     error_text(error, text, sizeof text), (unsigned long long)(unmapped * granule),
                                     (unsigned long long)(mapped * granule));
}

static NxmemStatus take_out(Allocator* self, const NxmemAllocation* allocation, Region** out) {
  if (allocation->struct_size < sizeof(NxmemAllocation))
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short allocation");
  pthread_mutex_lock(&self->mutex);
  NxmemStatus found = lookup(self, allocation, out);
  if (!failed(found)) unlink_region(self, *out);
  pthread_mutex_unlock(&self->mutex);
  return found;
}

static NxmemStatus vm_deallocate(void* ctx, const NxmemAllocation* allocation, uint64_t* unmapped_out) {
  if (allocation == NULL || unmapped_out == NULL)
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  Region* region = NULL;
  const NxmemStatus found = take_out(ctx, allocation, &region);
  if (failed(found)) return found;
  NxmemReleaseOutcome outcome;
  release_taken(ctx, region, &outcome);
  if (outcome.state == NXMEM_RELEASE_FAILED) return outcome.failure;
  *unmapped_out = outcome.unmapped_bytes;
  if (outcome.state == NXMEM_RELEASE_COMPLETE) return example_ok();
  /* Without the structured release a partial one has only its status to
   * say that the allocation is gone for good rather than still live. */
  NxmemStatus quarantined = outcome.failure;
  quarantined.code = NXMEM_STATUS_RELEASE_QUARANTINED;
  return quarantined;
}

static NxmemStatus vm_release_allocation(void* ctx, const NxmemAllocation* allocation, NxmemReleaseOutcome* outcome) {
  if (allocation == NULL || outcome == NULL)
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  Region* region = NULL;
  const NxmemStatus found = take_out(ctx, allocation, &region);
  if (failed(found)) {
    /* Nothing was changed: the allocation, if it is one, is still live. */
    memset(outcome, 0, sizeof *outcome);
    outcome->struct_size = sizeof *outcome;
    outcome->state = NXMEM_RELEASE_FAILED;
    outcome->failure = found;
    return example_ok();
  }
  release_taken(ctx, region, outcome);
  return example_ok();
}

static void vm_retain(void* ctx) { atomic_fetch_add(&((Allocator*)ctx)->references, 1); }

/* Frees the allocator and whatever the host left in it. Nothing else runs in
 * it any more: the queue is empty and the worker has been joined, or is the
 * caller. */
static void destroy_allocator(Allocator* self) {
  /* The host gives back what it holds first; whatever is left goes here so
   * the module can be unloaded. */
  for (size_t b = 0; b < self->bucket_count; ++b) {
    for (Region* region = self->buckets[b]; region != NULL;) {
      Region* next = region->next;
      munmap(region->base, (size_t)(region->granule_count * self->granule));
      detach_prefixes(self, region);
      free_region(region);
      atomic_fetch_sub(&live_allocations, 1);
      region = next;
    }
  }
  /* A lost device's memory goes with its context, as a driver frees it. */
  for (Region* region = self->retired; region != NULL;) {
    Region* next = region->next;
    munmap(region->base, (size_t)(region->granule_count * self->granule));
    detach_prefixes(self, region);
    free_region(region);
    atomic_fetch_sub(&live_allocations, 1);
    region = next;
  }
  for (Prefix* prefix = self->prefixes; prefix != NULL;) {
    Prefix* next = prefix->next;
    if (prefix->references != 0) close_prefix(prefix);
    free(prefix);
    prefix = next;
  }
  free(self->buckets);
  free(self->exit_record);
  pthread_cond_destroy(&self->changed);
  pthread_mutex_destroy(&self->mutex);
  free(self);
}

/* ---- deferred release --------------------------------------------------- */

/* Whether the calling thread is inside a completion this allocator is
 * delivering; caller holds the mutex. */
static int is_deliverer(const Allocator* self) {
  return self->delivering && pthread_equal(self->deliverer, pthread_self());
}

/* Whether the final release left its close to the calling thread's
 * delivering frame; caller holds the mutex. */
static int must_close(const Allocator* self) { return self->closing && pthread_equal(self->closer, pthread_self()); }

/* Whether a fence still holds `ticket`; caller holds the mutex. */
static int is_fenced(const Allocator* self, uint64_t ticket) {
  return self->first_fenced != 0 && ticket >= self->first_fenced;
}

/* Whether a deliverer may take the head ticket now; caller holds the mutex. */
static int head_ready(const Allocator* self) {
  return self->queue_head != NULL && !self->delivering && !is_fenced(self, self->queue_head->ticket);
}

static uint64_t pending_locked(const Allocator* self) { return self->queued + (self->delivering ? 1u : 0u); }

/* A host's status message, fit for one of ours: its bytes need not end in
 * NUL or be valid UTF-8, so only printable ASCII passes. */
static const char* host_message(const NxmemStatus* status, char* out, size_t size) {
  size_t length = status->message_len < NXMEM_STATUS_MESSAGE_MAX ? status->message_len : NXMEM_STATUS_MESSAGE_MAX;
  if (length > size - 1) length = size - 1;
  for (size_t i = 0; i < length; ++i) {
    const uint8_t byte = status->message[i];
    if (byte == 0) {
      length = i;
      break;
    }
    out[i] = byte >= 0x20 && byte < 0x7f ? (char)byte : '?';
  }
  out[length] = '\0';
  return out;
}

/* Takes the head ticket, releases its region as the structured release
 * would, and reports it. Caller holds the mutex, nobody is delivering and
 * the queue is not empty; a fence on the head is the caller's to have
 * passed or overruled. The mutex is dropped across the release and the
 * host's callback (which may call back into this allocator) and held again
 * on return; the `delivering` mark it leaves meanwhile is what keeps every
 * other thread from taking the next ticket before this one is reported.
 * Answers what release_completed answered. */
static NxmemStatus deliver_head_locked(Allocator* self) {
  Queued* queued = self->queue_head;
  self->queue_head = queued->next;
  if (self->queue_head == NULL) self->queue_tail = NULL;
  --self->queued;
  self->delivering = 1;
  self->deliverer = pthread_self();
  /* Decided as the ticket is taken: one taken before the loss was already
   * being released, and is reported as what it became. */
  const int lost = self->device_lost;
  if (lost) retire_region_locked(self, queued->region);
  pthread_mutex_unlock(&self->mutex);

  NxmemReleaseCompletion completion;
  memset(&completion, 0, sizeof completion);
  completion.struct_size = sizeof completion;
  completion.ticket = queued->ticket;
  completion.mechanism_id = MECHANISM_ID;
  completion.allocation_id = queued->allocation_id;
  if (lost) {
    NxmemReleaseOutcome* outcome = &completion.outcome;
    outcome->struct_size = sizeof *outcome;
    outcome->state = NXMEM_RELEASE_QUARANTINED;
    outcome->allocation_bytes = queued->bytes;
    outcome->residual_owned_bytes = queued->bytes;
    outcome->failure = example_status(NXMEM_STATUS_DEVICE_ERROR, NAME
                                      ": the device was lost with this release queued; its memory was not "
                                      "released and stays with the allocator until its final release");
  } else {
    /* A FAILED release leaves the region back in the table, live; the host
     * restores its record on FAILED. */
    release_taken(self, queued->region, &completion.outcome);
  }
  free(queued);
  const NxmemStatus answer = self->host.release_completed(self->host.host_ctx, &completion);
  /* Counted until the callback has returned: until then the module's code
   * still runs for this ticket. */
  atomic_fetch_sub(&queued_releases, 1);

  pthread_mutex_lock(&self->mutex);
  self->delivering = 0;
  self->delivered_through = completion.ticket;
  pthread_cond_broadcast(&self->changed);
  return answer;
}

/* The final release's queue work: every ticket still queued is reported, in
 * order, by the caller or by the worker where it is mid-delivery, and then
 * the worker is told to exit. Caller holds the mutex and is not delivering. */
static void close_queue_locked(Allocator* self) {
  /* Nobody is left to signal a fence once the host has dropped the
   * allocator, so closing it waits out its work, as destroying a driver's
   * context synchronizes it: every fence passes here. */
  self->work_outstanding = 0;
  self->first_fenced = 0;
  pthread_cond_broadcast(&self->changed);
  while (self->queue_head != NULL || self->delivering) {
    if (self->delivering) {
      pthread_cond_wait(&self->changed, &self->mutex);
    } else {
      /* A completion the host refuses is still delivered: its memory is
       * already gone, and nobody is left to tell. */
      (void)deliver_head_locked(self);
    }
  }
  self->stopping = 1;
  pthread_cond_broadcast(&self->changed);
}

/* The final release, on any thread but the worker. Caller holds the mutex
 * and is not delivering; the allocator is gone on return. */
static void close_and_free(Allocator* self) {
  close_queue_locked(self);
  const int joins = self->worker_started;
  const pthread_t worker = self->worker;
  pthread_mutex_unlock(&self->mutex);
  /* Joined before anything is freed: no completion after the memory goes,
   * and no thread left running the module's code once live_allocators says
   * it may go. */
  if (joins) pthread_join(worker, NULL);
  destroy_allocator(self);
  atomic_fetch_sub(&live_allocators, 1);
}

static void* release_worker(void* arg) {
  Allocator* self = arg;
  uint64_t mine = 0; /* the last ticket this worker reported; 0 before any */
  pthread_mutex_lock(&self->mutex);
  while (!self->stopping) {
    const int my_turn = self->drainers == 0 || mine == 0 || self->delivered_through != mine;
    if (!head_ready(self) || !my_turn || self->kit_driven) {
      pthread_cond_wait(&self->changed, &self->mutex);
      continue;
    }
    (void)deliver_head_locked(self); /* a refused completion has nobody to go to */
    mine = self->delivered_through;
    if (must_close(self)) {
      /* The host dropped the allocator from inside this completion. This
       * thread cannot join itself, so it leaves its record for the unload
       * report to join, and live_allocators keeps counting it until then. */
      close_queue_locked(self);
      Exited* record = self->exit_record;
      self->exit_record = NULL;
      pthread_mutex_unlock(&self->mutex);
      destroy_allocator(self);
      record->thread = pthread_self();
      pthread_mutex_lock(&exited_mutex);
      record->next = exited_workers;
      exited_workers = record;
      pthread_mutex_unlock(&exited_mutex);
      return NULL;
    }
  }
  pthread_mutex_unlock(&self->mutex);
  return NULL;
}

/* Joins the workers that closed their own allocator. Each has made its last
 * call and touched its last allocator byte, so a join waits only for its
 * thread to end. */
static void join_exited_workers(void) {
  pthread_mutex_lock(&exited_mutex);
  Exited* record = exited_workers;
  exited_workers = NULL;
  pthread_mutex_unlock(&exited_mutex);
  while (record != NULL) {
    Exited* next = record->next;
    pthread_join(record->thread, NULL);
    free(record);
    atomic_fetch_sub(&live_allocators, 1);
    record = next;
  }
}

/* The worker starts with the first deferred release rather than at open: an
 * allocator the host never defers through costs no thread, and a thread that
 * cannot start refuses one enqueue (which changes nothing) rather than the
 * whole open. Caller holds the mutex, which the new worker waits for. */
static NxmemStatus start_worker_locked(Allocator* self) {
  Exited* record = calloc(1, sizeof *record);
  if (record == NULL)
    return example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory for the release worker's record");
  /* Created with every signal blocked, which it keeps: a process signal is
   * the host's, for a thread the host runs, not for this one. */
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  const int error = pthread_create(&self->worker, NULL, release_worker, self);
  pthread_sigmask(SIG_SETMASK, &previous, NULL);
  if (error != 0) {
    free(record);
    char text[128];
    return example_statusf(code_of_errno(error), NAME ": could not start the release worker (%s); nothing was queued",
                           error_text(error, text, sizeof text));
  }
  self->exit_record = record;
  self->worker_started = 1;
  return example_ok();
}

/* Why the queue takes no ticket now, in the controls' precedence: a lost
 * device, then a closed queue, then a full one. Caller holds the mutex. */
static NxmemStatus queue_refusal_locked(const Allocator* self) {
  if (self->device_lost) {
    return example_status(NXMEM_STATUS_DEVICE_ERROR,
                          NAME ": the device is lost, so nothing more is queued; the allocation stays live");
  }
  if (self->queue_closed) {
    return example_status(NXMEM_STATUS_UNSUPPORTED_CAPABILITY, NAME
                          ": the release queue is closed, so deferred release is no longer offered; the "
                          "allocation stays live");
  }
  if (self->capacity != 0 && pending_locked(self) >= self->capacity) {
    return example_statusf(NXMEM_STATUS_BUSY,
                           NAME
                           ": the release queue is full (%llu tickets pending); the allocation "
                           "stays live",
                           (unsigned long long)self->capacity);
  }
  return example_ok();
}

static NxmemStatus vm_enqueue_release(void* ctx, const NxmemAllocation* allocation, uint64_t* ticket_out) {
  Allocator* self = ctx;
  if (allocation == NULL || ticket_out == NULL)
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  if (allocation->struct_size < sizeof(NxmemAllocation))
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short allocation");
  if (self->host.release_completed == NULL) {
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME
                          ": no release_completed callback was given at open, so a queued release could never be "
                          "reported; release it directly");
  }
  /* What can fail for want of memory or a thread is done before the
   * allocation leaves the table, so a refused enqueue changes nothing. */
  Queued* queued = malloc(sizeof *queued);
  if (queued == NULL) return example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory for the queued release");
  Region* region = NULL;
  pthread_mutex_lock(&self->mutex);
  NxmemStatus outcome = lookup(self, allocation, &region);
  if (!failed(outcome)) outcome = queue_refusal_locked(self);
  if (!failed(outcome) && !self->worker_started) outcome = start_worker_locked(self);
  if (failed(outcome)) {
    pthread_mutex_unlock(&self->mutex);
    free(queued);
    return outcome;
  }
  /* Out of the table from now: the host has dropped its record, and no call
   * may reach the allocation again, though it stays mapped (and counted in
   * live_allocations) until its release is performed. */
  unlink_region(self, region);
  queued->ticket = ++self->last_ticket;
  if (self->work_outstanding && self->first_fenced == 0) self->first_fenced = queued->ticket;
  queued->allocation_id = region->id;
  queued->bytes = region->bytes;
  queued->region = region;
  queued->next = NULL;
  if (self->queue_tail != NULL) {
    self->queue_tail->next = queued;
  } else {
    self->queue_head = queued;
  }
  self->queue_tail = queued;
  ++self->queued;
  atomic_fetch_add(&queued_releases, 1);
  /* Written while the mutex is still held: no deliverer can take the ticket,
   * so none can report it, before the host has its number. */
  *ticket_out = queued->ticket;
  pthread_cond_broadcast(&self->changed);
  pthread_mutex_unlock(&self->mutex);
  return example_ok();
}

/* Reports, from the calling thread, up to `max` of the tickets issued before
 * the call whose fences had passed, in order. It returns once every one of
 * those has been reported (waiting out a delivery the worker has in
 * progress) or once it has reported `max` itself, so the host's counts are
 * exact when it returns.
 * Tickets enqueued meanwhile, even from its own completions, are the
 * worker's: they cannot keep this call going. */
static NxmemStatus vm_drain_releases(void* ctx, uint64_t max, uint64_t* retired_out) {
  Allocator* self = ctx;
  if (retired_out == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  uint64_t retired = 0;
  NxmemStatus answer = example_ok();
  pthread_mutex_lock(&self->mutex);
  if (is_deliverer(self)) {
    /* Waiting here would wait for this very thread's own delivery. */
    pthread_mutex_unlock(&self->mutex);
    *retired_out = 0;
    return example_status(NXMEM_STATUS_BUSY, NAME
                          ": drain_releases was called from inside this allocator's release_completed; the "
                          "tickets still queued are reported after that callback returns");
  }
  /* The fenced tickets are the queue's tail: everything before the first
   * of them has passed, and is what this call answers for. */
  const uint64_t through = self->first_fenced != 0 ? self->first_fenced - 1 : self->last_ticket;
  /* Counted only with a budget: the worker stands back for a drain that
   * will take the next ticket, never for one that cannot. */
  const unsigned counted = max != 0;
  self->drainers += counted;
  while (self->delivered_through < through) {
    if (self->delivering) {
      pthread_cond_wait(&self->changed, &self->mutex);
      continue;
    }
    if (retired == max || self->queue_head == NULL || is_fenced(self, self->queue_head->ticket)) break;
    const uint64_t ticket = self->queue_head->ticket;
    const NxmemStatus reported = deliver_head_locked(self);
    ++retired;
    if (must_close(self)) {
      /* The host dropped the allocator from inside that completion. */
      self->drainers -= counted;
      close_and_free(self);
      *retired_out = retired;
      return answer;
    }
    if (failed(reported)) {
      char text[NXMEM_STATUS_MESSAGE_MAX + 1];
      answer = example_statusf(NXMEM_STATUS_CALLBACK_FAILED,
                               NAME
                               ": release_completed refused ticket %llu (status %u: %s); it is retired all the "
                               "same, and the worker reports the rest",
                               (unsigned long long)ticket, reported.code, host_message(&reported, text, sizeof text));
      break;
    }
  }
  self->drainers -= counted;
  pthread_cond_broadcast(&self->changed); /* the worker may be standing back for this call */
  pthread_mutex_unlock(&self->mutex);
  *retired_out = retired;
  return answer;
}

static NxmemStatus vm_pending_release_count(void* ctx, uint64_t* count_out) {
  Allocator* self = ctx;
  if (count_out == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  pthread_mutex_lock(&self->mutex);
  const uint64_t count = pending_locked(self);
  pthread_mutex_unlock(&self->mutex);
  *count_out = count;
  return example_ok();
}

static void vm_release(void* ctx) {
  Allocator* self = ctx;
  if (atomic_fetch_sub(&self->references, 1) != 1) return;
  pthread_mutex_lock(&self->mutex);
  if (is_deliverer(self)) {
    /* Dropped from inside a completion this thread is delivering. The frame
     * that called the host resumes in this allocator when the callback
     * returns, so freeing it here would pull it from under that frame, and
     * waiting for the worker could wait on this very thread: that frame
     * finishes the close instead. */
    self->closing = 1;
    self->closer = pthread_self();
    pthread_mutex_unlock(&self->mutex);
    return;
  }
  close_and_free(self);
}

/* ---- virtual backing ---------------------------------------------------- */

static NxmemStatus vm_allocate_committed(void* ctx, const NxmemAllocRequest* request, NxmemAllocResult* result) {
  if (request == NULL || result == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  if (request->struct_size < sizeof(NxmemAllocRequest))
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short request");
  return make_allocation(ctx, request, request->committed_ranges, request->committed_range_count, result);
}

static NxmemStatus vm_commit_range(void* ctx, const NxmemRangeRequest* request) {
  Allocator* self = ctx;
  if (request == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  if (request->struct_size < sizeof(NxmemRangeRequest))
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short request");
  Region* region = NULL;
  pthread_mutex_lock(&self->mutex);
  NxmemStatus outcome = lookup(self, &request->allocation, &region);
  if (!failed(outcome)) {
    if (!range_inside(request->range.offset, request->range.bytes, region->bytes)) {
      outcome = outside(request->range.offset, request->range.bytes, region->bytes);
    } else {
      outcome = commit_locked(self, region, request->range.offset, request->range.bytes, 1);
    }
  }
  pthread_mutex_unlock(&self->mutex);
  return outcome;
}

/* A granule the decommit may unmap: committed, and holding no committed byte
 * outside [begin, end). */
static int is_victim(const Region* region, uint64_t g, uint64_t begin, uint64_t end, uint64_t granule) {
  if (region->granules[g] != GRANULE_COMMITTED) return 0;
  const uint64_t low = g * granule;
  const uint64_t high = low + granule;
  return !spans_intersect(&region->committed, low, begin > low ? begin : low) &&
         !spans_intersect(&region->committed, end < high ? end : high, high);
}

enum { VICTIMS_PROTECT_NONE, VICTIMS_PROTECT_READ_WRITE, VICTIMS_DISCARD };

/* Applies one step of a decommit to each run of victims in [first, last].
 * 0 with errno on the first failure. Putting access back (READ_WRITE) goes
 * over every run, so it also mends a run a failed call changed in part.
 * Taking access away is the step a DECOMMIT fault fails, granule by granule:
 * it is the one a failure can still undo with every byte in place, where a
 * failed discard would already have lost the granules before it. Caller
 * holds the mutex. */
static int each_victim_run(Allocator* self, const Region* region, uint64_t first, uint64_t last, uint64_t begin,
                           uint64_t end, int step) {
  const uint64_t granule = self->granule;
  for (uint64_t g = first; g <= last;) {
    if (!is_victim(region, g, begin, end, granule)) {
      ++g;
      continue;
    }
    uint64_t run = g;
    while (run <= last && is_victim(region, run, begin, end, granule)) ++run;
    void* at = granule_at(region, g, granule);
    const size_t length = (size_t)((run - g) * granule);
    if (step == VICTIMS_PROTECT_NONE) {
      const uint64_t fine = steps_before_fault_locked(self, ORTMEM_CTS_FAULT_DECOMMIT, run - g);
      if (fine < run - g) {
        /* Cut at the armed granule: those before it lose their access, then
         * it fails as mprotect does when the kernel runs out. */
        if (fine != 0 && mprotect(at, (size_t)(fine * granule), PROT_NONE) != 0) return 0;
        errno = ENOMEM;
        return 0;
      }
    }
    const int done = step == VICTIMS_DISCARD        ? madvise(at, length, MADV_DONTNEED) == 0
                     : step == VICTIMS_PROTECT_NONE ? mprotect(at, length, PROT_NONE) == 0
                                                    : mprotect(at, length, PROT_READ | PROT_WRITE) == 0;
    if (!done) return 0;
    g = run;
  }
  return 1;
}

static NxmemStatus vm_decommit_range(void* ctx, const NxmemRangeRequest* request, uint64_t* unmapped_out) {
  Allocator* self = ctx;
  if (request == NULL || unmapped_out == NULL)
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  if (request->struct_size < sizeof(NxmemRangeRequest))
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short request");
  const uint64_t granule = self->granule;
  const uint64_t begin = request->range.offset;
  const uint64_t length = request->range.bytes;
  Region* region = NULL;
  pthread_mutex_lock(&self->mutex);
  NxmemStatus outcome = lookup(self, &request->allocation, &region);
  if (failed(outcome)) goto done;
  if (!range_inside(begin, length, region->bytes)) {
    outcome = outside(begin, length, region->bytes);
    goto done;
  }
  if (length == 0) {
    *unmapped_out = 0;
    goto done;
  }
  if (!spans_reserve_one(&region->committed)) {
    outcome = example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory for the committed-range record");
    goto done;
  }
  {
    const uint64_t end = begin + length;
    const uint64_t first = begin / granule;
    const uint64_t last = (end - 1) / granule;
    /* Access first (reversible), then discard the pages: a failure puts
     * every granule's access back as it was. */
    const int steps[2] = {VICTIMS_PROTECT_NONE, VICTIMS_DISCARD};
    for (int i = 0; i < 2; ++i) {
      if (!each_victim_run(self, region, first, last, begin, end, steps[i])) {
        const int error = errno;
        each_victim_run(self, region, first, last, begin, end, VICTIMS_PROTECT_READ_WRITE);
        char text[128];
        outcome =
            example_statusf(code_of_errno(error), NAME ": %s failed while decommitting (%s); the range stays committed",
                            i == 0 ? "mprotect" : "madvise", error_text(error, text, sizeof text));
        goto done;
      }
    }
    /* The victims are decided against the set before the range leaves it. */
    uint64_t unmapped = 0;
    for (uint64_t g = first; g <= last; ++g) {
      if (!is_victim(region, g, begin, end, granule)) continue;
      region->granules[g] = GRANULE_UNMAPPED;
      unmapped += granule;
    }
    spans_remove(&region->committed, begin, end);
    *unmapped_out = unmapped;
  }
done:
  pthread_mutex_unlock(&self->mutex);
  return outcome;
}

typedef struct Touch {
  uintptr_t base;
  uint64_t first;
  uint64_t end;
} Touch;

static int touch_order(const void* a, const void* b) {
  const Touch* x = a;
  const Touch* y = b;
  if (x->base != y->base) return x->base < y->base ? -1 : 1;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return 0;
}

/* Counts granules, each once however many ranges touch it. */
static NxmemStatus vm_mapped_bytes_for_ranges(void* ctx, const NxmemRangeRequest* requests, uint64_t count,
                                              uint64_t* mapped_out) {
  Allocator* self = ctx;
  if (mapped_out == NULL || (count != 0 && requests == NULL)) {
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  }
  if (count == 0) {
    *mapped_out = 0;
    return example_ok();
  }
  if (count > SIZE_MAX / sizeof(Touch)) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": too many ranges");
  Touch* touches = malloc((size_t)count * sizeof *touches);
  if (touches == NULL) return example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory to estimate the ranges");
  const uint64_t granule = self->granule;
  size_t used = 0;
  NxmemStatus outcome = example_ok();
  pthread_mutex_lock(&self->mutex);
  for (uint64_t i = 0; i < count && !failed(outcome); ++i) {
    const NxmemRangeRequest* request = &requests[i];
    Region* region = NULL;
    if (request->struct_size < sizeof(NxmemRangeRequest)) {
      outcome = example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short range request");
    } else if (!failed(outcome = lookup(self, &request->allocation, &region))) {
      if (!range_inside(request->range.offset, request->range.bytes, region->bytes)) {
        outcome = outside(request->range.offset, request->range.bytes, region->bytes);
      } else if (request->range.bytes != 0) {
        touches[used++] = (Touch){(uintptr_t)region->base, request->range.offset / granule,
                                  (request->range.offset + request->range.bytes - 1) / granule + 1};
      }
    }
  }
  pthread_mutex_unlock(&self->mutex);
  if (!failed(outcome)) {
    qsort(touches, used, sizeof *touches, touch_order);
    uint64_t granules = 0;
    for (size_t i = 0; i < used;) {
      const uintptr_t base = touches[i].base;
      uint64_t first = touches[i].first;
      uint64_t end = touches[i].end;
      for (++i; i < used && touches[i].base == base && touches[i].first <= end; ++i) {
        if (touches[i].end > end) end = touches[i].end;
      }
      granules += end - first;
    }
    *mapped_out = granules * granule;
  }
  free(touches);
  return outcome;
}

static NxmemStatus vm_mapped_bytes_for_allocation(void* ctx, const NxmemAllocRequest* request, uint64_t* mapped_out) {
  Allocator* self = ctx;
  if (request == NULL || mapped_out == NULL)
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  if (request->struct_size < sizeof(NxmemAllocRequest))
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short request");
  NxmemStatus identity = check_identity(self, request->mechanism_id, request->device);
  if (failed(identity)) return identity;
  if (!is_power_of_two(request->align)) {
    return example_statusf(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": alignment %llu is not a power of two",
                           (unsigned long long)request->align);
  }
  if (request->bytes > UINT64_MAX - (self->granule - 1)) {
    return example_statusf(NXMEM_STATUS_INVALID_ARGUMENT,
                           NAME ": the size %llu overflows when rounded up to whole granules",
                           (unsigned long long)request->bytes);
  }
  /* What allocate commits: the bytes, in whole granules. */
  *mapped_out = round_up(request->bytes, self->granule);
  return example_ok();
}

static NxmemStatus vm_committed_bytes(void* ctx, const NxmemAllocation* allocation, uint64_t* committed_out) {
  Allocator* self = ctx;
  if (allocation == NULL || committed_out == NULL)
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  if (allocation->struct_size < sizeof(NxmemAllocation))
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short allocation");
  Region* region = NULL;
  pthread_mutex_lock(&self->mutex);
  NxmemStatus outcome = lookup(self, allocation, &region);
  if (!failed(outcome)) {
    uint64_t count = 0;
    for (uint64_t g = 0; g < region->granule_count; ++g) count += region->granules[g] == GRANULE_COMMITTED;
    *committed_out = count * self->granule;
  }
  pthread_mutex_unlock(&self->mutex);
  return outcome;
}

/* ---- shared mapping ----------------------------------------------------- */

/* A live prefix of this allocator; caller holds the mutex. The cost query and
 * the commit both refuse through here, so they refuse a foreign prefix alike. */
static NxmemStatus find_prefix(const Allocator* self, const NxmemSharedPrefixHandle* handle, Prefix** out) {
  if (handle->struct_size < sizeof(NxmemSharedPrefixHandle)) {
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short prefix handle");
  }
  NxmemStatus identity = check_identity(self, handle->mechanism_id, handle->device);
  if (failed(identity)) return identity;
  for (Prefix* prefix = self->prefixes; prefix != NULL; prefix = prefix->next) {
    if (prefix->handle == handle->handle && prefix->references != 0) {
      *out = prefix;
      return example_ok();
    }
  }
  return example_statusf(NXMEM_STATUS_INVALID_ARGUMENT,
                         NAME ": prefix %llu is not a live prefix of this allocator (foreign, unknown or released)",
                         (unsigned long long)handle->handle);
}

static NxmemStatus vm_create_shared_prefix(void* ctx, uint64_t mechanism_id, uint64_t bytes,
                                           NxmemSharedPrefixHandle* handle_out) {
  Allocator* self = ctx;
  if (handle_out == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  if (mechanism_id != MECHANISM_ID) return example_status(NXMEM_STATUS_WRONG_MECHANISM, NAME ": not this mechanism");
  if (bytes == 0)
    return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": a shared prefix of zero bytes shares nothing");
  if (bytes > (uint64_t)INT64_MAX - (self->granule - 1)) {
    return example_statusf(NXMEM_STATUS_INVALID_ARGUMENT,
                           NAME ": the prefix size %llu overflows when rounded up to whole granules",
                           (unsigned long long)bytes);
  }
  const uint64_t mapped = round_up(bytes, self->granule);
  Prefix* prefix = calloc(1, sizeof *prefix);
  if (prefix == NULL) return example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory for the prefix record");
  char text[128];
  const int fd = memfd_create("nxmem-vm-host-prefix", MFD_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    free(prefix);
    return example_statusf(code_of_errno(error), NAME ": memfd_create: %s", error_text(error, text, sizeof text));
  }
  if (ftruncate(fd, (off_t)mapped) != 0) {
    const int error = errno;
    close(fd);
    free(prefix);
    return example_statusf(code_of_errno(error), NAME ": ftruncate of the prefix memfd to %llu bytes: %s",
                           (unsigned long long)mapped, error_text(error, text, sizeof text));
  }
  void* window = mmap(NULL, (size_t)mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (window == MAP_FAILED) {
    const int error = errno;
    close(fd);
    free(prefix);
    return example_statusf(code_of_errno(error), NAME ": mmap of the prefix owner window of %llu bytes: %s",
                           (unsigned long long)mapped, error_text(error, text, sizeof text));
  }
  prefix->handle = atomic_fetch_add(&next_handle, 1);
  prefix->fd = fd;
  prefix->window = window;
  prefix->mapped_bytes = mapped;
  prefix->requested_bytes = bytes;
  prefix->references = 1;
  pthread_mutex_lock(&self->mutex);
  prefix->next = self->prefixes;
  self->prefixes = prefix;
  pthread_mutex_unlock(&self->mutex);
  atomic_fetch_add(&live_capabilities, 1);
  memset(handle_out, 0, sizeof *handle_out);
  handle_out->struct_size = sizeof *handle_out;
  handle_out->mechanism_id = MECHANISM_ID;
  handle_out->handle = prefix->handle;
  handle_out->device = self->vtable.device;
  handle_out->device_ptr = (uint64_t)(uintptr_t)window;
  handle_out->committed_physical_bytes = mapped;
  handle_out->mapped_bytes = mapped;
  handle_out->requested_bytes = bytes;
  return example_ok();
}

static NxmemStatus vm_retain_shared_prefix(void* ctx, const NxmemSharedPrefixHandle* handle) {
  Allocator* self = ctx;
  if (handle == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  Prefix* prefix = NULL;
  pthread_mutex_lock(&self->mutex);
  NxmemStatus outcome = find_prefix(self, handle, &prefix);
  if (!failed(outcome)) ++prefix->references;
  pthread_mutex_unlock(&self->mutex);
  return outcome;
}

static NxmemStatus vm_release_shared_prefix(void* ctx, const NxmemSharedPrefixHandle* handle) {
  Allocator* self = ctx;
  if (handle == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  Prefix* prefix = NULL;
  pthread_mutex_lock(&self->mutex);
  NxmemStatus outcome = find_prefix(self, handle, &prefix);
  if (!failed(outcome) && --prefix->references == 0) {
    /* The mappings in targets keep the pages; only the owner's side goes. */
    close_prefix(prefix);
    forget_prefix_if_unheld(self, prefix);
  }
  pthread_mutex_unlock(&self->mutex);
  return outcome;
}

static NxmemStatus vm_incremental_owned_bytes(void* ctx, const NxmemSharedPrefixHandle* handle, uint64_t* bytes_out) {
  Allocator* self = ctx;
  if (handle == NULL || bytes_out == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  Prefix* prefix = NULL;
  pthread_mutex_lock(&self->mutex);
  NxmemStatus outcome = find_prefix(self, handle, &prefix);
  pthread_mutex_unlock(&self->mutex);
  /* The prefix was charged when it was made; another mapping owns nothing new. */
  if (!failed(outcome)) *bytes_out = 0;
  return outcome;
}

static NxmemStatus vm_commit_shared_prefix(void* ctx, const NxmemSharedPrefixCommitRequest* request,
                                           NxmemSharedPrefixCommitInfo* info_out) {
  Allocator* self = ctx;
  if (request == NULL || info_out == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  if (request->struct_size < sizeof(NxmemSharedPrefixCommitRequest)) {
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short request");
  }
  const uint64_t granule = self->granule;
  const uint64_t offset = request->byte_offset;
  Prefix* prefix = NULL;
  Region* region = NULL;
  pthread_mutex_lock(&self->mutex);
  NxmemStatus outcome = find_prefix(self, &request->prefix, &prefix);
  if (failed(outcome)) goto done;
  outcome = lookup(self, &request->allocation, &region);
  if (failed(outcome)) goto done;
  if (offset % granule != 0) {
    outcome = example_statusf(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": offset %llu is not a multiple of the granule %llu",
                              (unsigned long long)offset, (unsigned long long)granule);
    goto done;
  }
  {
    const uint64_t span = region->granule_count * granule;
    if (offset > region->bytes || prefix->requested_bytes > region->bytes - offset ||
        prefix->mapped_bytes > span - (offset < span ? offset : span)) {
      outcome = example_statusf(
          NXMEM_STATUS_INVALID_ARGUMENT,
          NAME ": a prefix of %llu bytes does not fit in the allocation of %llu bytes at offset %llu",
          (unsigned long long)prefix->requested_bytes, (unsigned long long)region->bytes, (unsigned long long)offset);
      goto done;
    }
    const uint64_t first = offset / granule;
    const uint64_t count = prefix->mapped_bytes / granule;
    for (uint64_t g = first; g < first + count; ++g) {
      if (region->granules[g] != GRANULE_UNMAPPED) {
        outcome = example_statusf(NXMEM_STATUS_INVALID_ARGUMENT,
                                  NAME ": the target range at offset %llu is already committed or mapped",
                                  (unsigned long long)offset);
        goto done;
      }
    }
    /* The only step that can fail for want of memory, before any mapping. */
    if (region->prefix_count == region->prefix_capacity) {
      const size_t capacity = region->prefix_capacity == 0 ? 2 : region->prefix_capacity * 2;
      Prefix** grown = realloc(region->prefixes, capacity * sizeof *grown);
      if (grown == NULL) {
        outcome = example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory for the mapping record");
        goto done;
      }
      region->prefixes = grown;
      region->prefix_capacity = capacity;
    }
    void* target = region->base + offset;
    /* One MAP_FIXED call: the whole range maps or none of it does. An armed
     * PREFIX_MAP fault cuts it at its granule: the granules before it are
     * mapped, as a call per granule would have, and the failure unmaps
     * them with the rest. */
    const uint64_t fine = steps_before_fault_locked(self, ORTMEM_CTS_FAULT_PREFIX_MAP, count);
    int error = 0;
    if (fine != 0 &&
        mmap(target, (size_t)(fine * granule), PROT_READ, MAP_SHARED | MAP_FIXED, prefix->fd, 0) == MAP_FAILED) {
      error = errno;
    } else if (fine < count) {
      error = ENOMEM; /* the injected failure: what mmap says when the kernel runs out */
    }
    if (error != 0) {
      /* Keep the range reserved and inaccessible, as it was. */
      mmap(target, (size_t)prefix->mapped_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
           0);
      char text[128];
      outcome = example_statusf(code_of_errno(error),
                                NAME ": mmap of the prefix into the target failed (%s); no mapping was made",
                                error_text(error, text, sizeof text));
      goto done;
    }
    for (uint64_t g = first; g < first + count; ++g) region->granules[g] = GRANULE_SHARED;
    region->prefixes[region->prefix_count++] = prefix;
    ++prefix->mappings;
    atomic_fetch_add(&live_views, 1);
    memset(info_out, 0, sizeof *info_out);
    info_out->struct_size = sizeof *info_out;
    info_out->additional_owned_bytes = 0; /* charged once, at creation */
    info_out->newly_mapped_bytes = prefix->mapped_bytes;
    info_out->granules = count;
  }
done:
  pthread_mutex_unlock(&self->mutex);
  return outcome;
}

/* ---- the ortmem-cts controls -------------------------------------------- */

static NxmemStatus no_allocator(void) { return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null allocator"); }

static NxmemStatus control_open_queue(void* ctx, uint64_t capacity) {
  Allocator* self = ctx;
  if (self == NULL) return no_allocator();
  pthread_mutex_lock(&self->mutex);
  const uint64_t pending = pending_locked(self);
  if (pending == 0) {
    self->work_outstanding = 0;
    self->first_fenced = 0;
    self->queue_closed = 0;
    self->device_lost = 0;
    self->capacity = capacity;
    self->kit_driven = 1;
  }
  pthread_mutex_unlock(&self->mutex);
  /* A new queue's rules would otherwise apply to tickets the old one took. */
  if (pending != 0) {
    return example_statusf(NXMEM_STATUS_BUSY, NAME ": %llu tickets of the earlier queue are still pending",
                           (unsigned long long)pending);
  }
  return example_ok();
}

static NxmemStatus control_record_use(void* ctx) {
  Allocator* self = ctx;
  if (self == NULL) return no_allocator();
  pthread_mutex_lock(&self->mutex);
  self->work_outstanding = 1;
  pthread_mutex_unlock(&self->mutex);
  return example_ok();
}

static NxmemStatus control_signal_fences(void* ctx) {
  Allocator* self = ctx;
  if (self == NULL) return no_allocator();
  pthread_mutex_lock(&self->mutex);
  self->work_outstanding = 0;
  self->first_fenced = 0;
  pthread_cond_broadcast(&self->changed); /* the worker may be waiting on a fenced head */
  pthread_mutex_unlock(&self->mutex);
  return example_ok();
}

static NxmemStatus control_close_queue(void* ctx) {
  Allocator* self = ctx;
  if (self == NULL) return no_allocator();
  pthread_mutex_lock(&self->mutex);
  self->queue_closed = 1;
  pthread_mutex_unlock(&self->mutex);
  return example_ok();
}

/* Every pending ticket is reported quarantined before this returns, by this
 * thread or the worker (whoever holds the deliverer role: the order and the
 * one-at-a-time delivery hold as for any ticket). */
static NxmemStatus control_lose_device(void* ctx) {
  Allocator* self = ctx;
  if (self == NULL) return no_allocator();
  pthread_mutex_lock(&self->mutex);
  if (is_deliverer(self)) {
    /* Waiting for the queue to empty would wait for this very thread. */
    pthread_mutex_unlock(&self->mutex);
    return example_status(NXMEM_STATUS_BUSY, NAME
                          ": lose_device was called from inside this allocator's release_completed, which "
                          "holds the queue's next ticket back");
  }
  self->device_lost = 1;
  /* The work behind every fence went with the device: no fence is left to
   * pass, so none holds a ticket back from its quarantine. */
  self->work_outstanding = 0;
  self->first_fenced = 0;
  pthread_cond_broadcast(&self->changed);
  while (self->queue_head != NULL || self->delivering) {
    if (self->delivering) {
      pthread_cond_wait(&self->changed, &self->mutex);
      continue;
    }
    (void)deliver_head_locked(self); /* a refused completion is still delivered: the ticket is settled */
    if (must_close(self)) {
      /* The host dropped the allocator from inside that completion. */
      close_and_free(self);
      return example_ok();
    }
  }
  pthread_mutex_unlock(&self->mutex);
  return example_ok();
}

static NxmemStatus control_arm_fault(void* ctx, uint32_t point, uint64_t nth) {
  Allocator* self = ctx;
  if (self == NULL) return no_allocator();
  if (point > ORTMEM_CTS_FAULT_PREFIX_MAP) {
    return example_statusf(NXMEM_STATUS_NOT_IMPLEMENTED, NAME ": no step lies behind fault point %u", point);
  }
  if (point == ORTMEM_CTS_FAULT_RELEASE_UNMAP && self->vtable.release_allocation == NULL) {
    /* Below minor 1 the host releases through deallocate, whose answer is
     * done or nothing changed: a release that unmapped part of its memory
     * could only be reported as one of the two, and both would be false. */
    return example_status(NXMEM_STATUS_NOT_IMPLEMENTED,
                          NAME ": an allocator opened at minor 0 has no structured release to report a partial one");
  }
  if (nth == 0) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": steps are counted from 1 (the very next)");
  pthread_mutex_lock(&self->mutex);
  self->faults[point] = nth;
  pthread_mutex_unlock(&self->mutex);
  return example_ok();
}

static NxmemStatus control_clear_faults(void* ctx) {
  Allocator* self = ctx;
  if (self == NULL) return no_allocator();
  pthread_mutex_lock(&self->mutex);
  memset(self->faults, 0, sizeof self->faults);
  pthread_mutex_unlock(&self->mutex);
  return example_ok();
}

/* Host memory is the kit's to read and write directly, so the memory slots
 * stay NULL. */
static const OrtmemCtsControls controls = {
    .struct_size = ORTMEM_CTS_CONTROLS_SIZE_V1,
    .version = ORTMEM_CTS_CONTROLS_VERSION,
    .mechanism_id = MECHANISM_ID,
    .controls = ORTMEM_CTS_CONTROL_FENCES | ORTMEM_CTS_CONTROL_QUEUE_CLOSE | ORTMEM_CTS_CONTROL_QUEUE_CAPACITY |
                ORTMEM_CTS_CONTROL_QUEUE_DEVICE_LOSS | ORTMEM_CTS_CONTROL_FAULT_INJECTION,
    .reserved = 0,
    .open_queue = control_open_queue,
    .record_use = control_record_use,
    .signal_fences = control_signal_fences,
    .close_queue = control_close_queue,
    .lose_device = control_lose_device,
    .arm_fault = control_arm_fault,
    .clear_faults = control_clear_faults,
    .fill = NULL,
    .read = NULL,
    .probe_write = NULL,
};

/* ---- the factory -------------------------------------------------------- */

static NxmemStatus open_allocator(void* ctx, const NxmemOpenRequest* request, const NxmemAllocatorVtable** out) {
  (void)ctx;
  if (request == NULL || out == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  if (request->struct_size < sizeof(NxmemOpenRequest))
    return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": short open request");
  if (request->device.tier != NXMEM_TIER_HOST || request->device.index != 0) {
    return example_status(NXMEM_STATUS_WRONG_DEVICE, NAME ": host memory (host, 0) only");
  }
  /* The open's minor is the ceiling: below 1 there is no structured release,
   * and the vtable is the minor-0 size. */
  const uint32_t minor = request->abi_minor < 1 ? request->abi_minor : 1;
  const uint64_t offered = minor >= 1 ? PLUGIN_CAPS : PLUGIN_CAPS & ~NXMEM_CAP_STRUCTURED_RELEASE;
  if ((request->required_capability_flags & ~offered) != 0) {
    return example_statusf(NXMEM_STATUS_UNSUPPORTED_CAPABILITY,
                           NAME ": required capabilities 0x%llx include some it lacks at minor %u (it offers 0x%llx)",
                           (unsigned long long)request->required_capability_flags, minor, (unsigned long long)offered);
  }
  /* The table is the same 32 bytes at every minor, so a shorter one is read
   * as none. A copy of it serves for the allocator's life: it is what this
   * plugin reads, and the host keeps its own valid for as long anyway. */
  NxmemHostCallbacks host;
  memset(&host, 0, sizeof host);
  const NxmemHostCallbacks* callbacks = request->callbacks;
  if (callbacks != NULL && callbacks->struct_size >= sizeof(NxmemHostCallbacks)) {
    host.struct_size = sizeof host;
    host.abi_minor = callbacks->abi_minor;
    host.host_ctx = callbacks->host_ctx;
    host.request_reclaim = callbacks->request_reclaim;
    host.release_completed = callbacks->release_completed;
  }
  /* Offered without a callback, deferred release is refused per enqueue;
   * required without one, it could never report a ticket. */
  if ((request->required_capability_flags & NXMEM_CAP_DEFERRED_RELEASE) != 0 && host.release_completed == NULL) {
    if (callbacks == NULL) {
      return example_status(NXMEM_STATUS_UNSUPPORTED_CAPABILITY, NAME
                            ": deferred release is required but no host callbacks were given, so a queued "
                            "release could never be reported");
    }
    return example_statusf(NXMEM_STATUS_UNSUPPORTED_CAPABILITY,
                           NAME
                           ": deferred release is required but the host callbacks (%u bytes) carry no "
                           "release_completed, so a queued release could never be reported",
                           callbacks->struct_size);
  }
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || !is_power_of_two((uint64_t)page))
    return example_status(NXMEM_STATUS_INTERNAL_ERROR, NAME ": no page size");
  Allocator* self = calloc(1, sizeof *self);
  if (self == NULL) return example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory for an allocator");
  self->bucket_count = 64;
  self->buckets = calloc(self->bucket_count, sizeof *self->buckets);
  if (self->buckets == NULL || pthread_cond_init(&self->changed, NULL) != 0) {
    free(self->buckets);
    free(self);
    return example_status(NXMEM_STATUS_OUT_OF_MEMORY, NAME ": no memory for an allocator");
  }
  pthread_mutex_init(&self->mutex, NULL);
  self->host = host;
  atomic_init(&self->references, 1);
  self->granule = (uint64_t)page;

  self->virtual_backing.struct_size = sizeof(NxmemVirtualBackingVtable);
  self->virtual_backing.abi_minor = minor;
  self->virtual_backing.mechanism_id = MECHANISM_ID;
  self->virtual_backing.ctx = self;
  self->virtual_backing.allocate_committed = vm_allocate_committed;
  self->virtual_backing.commit_range = vm_commit_range;
  self->virtual_backing.decommit_range = vm_decommit_range;
  self->virtual_backing.mapped_bytes_for_ranges = vm_mapped_bytes_for_ranges;
  self->virtual_backing.mapped_bytes_for_allocation = vm_mapped_bytes_for_allocation;
  self->virtual_backing.committed_bytes = vm_committed_bytes;

  self->shared_mapping.struct_size = sizeof(NxmemSharedMappingVtable);
  self->shared_mapping.abi_minor = minor;
  self->shared_mapping.mechanism_id = MECHANISM_ID;
  self->shared_mapping.ctx = self;
  self->shared_mapping.create_shared_prefix = vm_create_shared_prefix;
  self->shared_mapping.retain_shared_prefix = vm_retain_shared_prefix;
  self->shared_mapping.release_shared_prefix = vm_release_shared_prefix;
  self->shared_mapping.incremental_owned_bytes = vm_incremental_owned_bytes;
  self->shared_mapping.commit_shared_prefix = vm_commit_shared_prefix;

  self->vtable.struct_size = minor >= 1 ? sizeof(NxmemAllocatorVtable) : NXMEM_ALLOCATOR_VTABLE_SIZE_MINOR0;
  self->vtable.abi_minor = minor;
  self->vtable.mechanism_id = MECHANISM_ID;
  self->vtable.device = request->device;
  self->vtable.capability_flags = offered;
  self->vtable.name = (const uint8_t*)NAME;
  self->vtable.ctx = self;
  self->vtable.allocate = vm_allocate;
  self->vtable.deallocate = vm_deallocate;
  self->vtable.retain = vm_retain;
  self->vtable.release = vm_release;
  self->vtable.virtual_backing = &self->virtual_backing;
  self->vtable.shared_mapping = &self->shared_mapping;
  /* Offered whether or not the host gave callbacks; without them each
   * enqueue is refused and the queue stays empty. */
  self->vtable.enqueue_release = vm_enqueue_release;
  self->vtable.drain_releases = vm_drain_releases;
  self->vtable.pending_release_count = vm_pending_release_count;
  self->vtable.release_allocation = minor >= 1 ? vm_release_allocation : NULL;
  atomic_fetch_add(&live_allocators, 1);
  *out = &self->vtable;
  return example_ok();
}

static void release_factory(void* ctx) {
  (void)ctx;
  atomic_fetch_sub(&live_factories, 1);
}

/* One table per minor, so a factory never claims a bit the negotiation left out. */
static const NxmemAllocatorFactoryVtable factories[2] = {
    {
        .struct_size = sizeof(NxmemAllocatorFactoryVtable),
        .abi_minor = 0,
        .name = (const uint8_t*)NAME,
        .device = {NXMEM_TIER_HOST, 0},
        .capability_flags = PLUGIN_CAPS & ~NXMEM_CAP_STRUCTURED_RELEASE,
        .ctx = NULL,
        .open_allocator = open_allocator,
        .release = release_factory,
    },
    {
        .struct_size = sizeof(NxmemAllocatorFactoryVtable),
        .abi_minor = 1,
        .name = (const uint8_t*)NAME,
        .device = {NXMEM_TIER_HOST, 0},
        .capability_flags = PLUGIN_CAPS,
        .ctx = NULL,
        .open_allocator = open_allocator,
        .release = release_factory,
    },
};

/* ---- the exports -------------------------------------------------------- */

NxmemStatus NxmemNegotiate(const NxmemNegotiateRequest* request, NxmemNegotiateResponse* response) {
  const NxmemStatus answer = example_negotiate(NAME, 0, 1, PLUGIN_CAPS, request, response);
  if (answer.code == NXMEM_STATUS_OK) atomic_store(&negotiated_minor, response->agreed_minor);
  return answer;
}

NxmemStatus NxmemCreateAllocatorFactories(const NxmemAllocatorFactoryVtable** out, uint64_t max, uint64_t* count) {
  if (out == NULL || count == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  *count = 0;
  if (max < 1) return example_status(NXMEM_STATUS_SHORT_STRUCT, NAME ": no room for its one factory");
  out[0] = &factories[atomic_load(&negotiated_minor) >= 1 ? 1 : 0];
  *count = 1;
  atomic_fetch_add(&live_factories, 1);
  return example_ok();
}

NxmemStatus OrtmemCtsPluginControls(uint32_t kit_version, uint64_t mechanism_id,
                                    const OrtmemCtsControls** controls_out) {
  if (controls_out == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  *controls_out = NULL;
  if (kit_version < 1) {
    return example_statusf(NXMEM_STATUS_VERSION_MISMATCH,
                           NAME ": the controls table is version 1; the kit reads up to %u", kit_version);
  }
  if (mechanism_id != MECHANISM_ID) {
    return example_statusf(NXMEM_STATUS_NOT_IMPLEMENTED, NAME ": no controls for mechanism 0x%llx",
                           (unsigned long long)mechanism_id);
  }
  *controls_out = &controls;
  return example_ok();
}

NxmemStatus NxmemQueryUnloadReadiness(NxmemUnloadReport* report) {
  if (report == NULL) return example_status(NXMEM_STATUS_INVALID_ARGUMENT, NAME ": null argument");
  memset(report, 0, sizeof *report);
  report->struct_size = sizeof *report;
  join_exited_workers();
  report->live_allocators = atomic_load(&live_allocators) + atomic_load(&live_factories);
  /* A queued ticket counts twice, as what it is on each side: its allocation
   * stays in live_allocations (and its views in live_views) until its release
   * unmaps it, as the ABI has a queued allocation count as live, and the
   * ticket stays in queued_releases until its completion has returned, since
   * until then the module's code runs for it. The total only errs high. */
  report->live_allocations = atomic_load(&live_allocations);
  report->live_views = atomic_load(&live_views);
  report->live_capabilities = atomic_load(&live_capabilities);
  report->queued_releases = atomic_load(&queued_releases);
  return example_ok();
}
