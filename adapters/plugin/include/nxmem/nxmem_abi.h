/* nxmem/nxmem_abi.h: the nxmem memory-plugin C ABI, major 1, minor 1.
 *
 * The runtime loads allocator plugins through this boundary. These are the
 * kit's own declarations, written from the ABI's facts (layouts, codes and
 * rules in the project's NXMEM_ABI notes); a plugin built against the
 * runtime's header is binary-identical, and the static assertions at the end
 * hold every size and offset to those facts, so a drift here fails the build
 * instead of misreading a plugin.
 *
 * Rules that every struct shares:
 *  - `struct_size` is the size the writer knows. A reader copies at most what
 *    it knows into a zeroed local, so a later minor's appended fields never
 *    reach an older reader and an older writer's missing tail reads as zero.
 *  - Every `reserved` field is zero.
 *  - A minor only appends fields and vtable slots; the major is a hard gate.
 *  - Every pointer handed into a call is borrowed for that call, except where
 *    a field says otherwise (callbacks, names, vtables and their ctx).
 *  - Any slot may be called from any thread at once. A plugin locks for
 *    itself, never blocks indefinitely, never holds its own lock across a
 *    host callback, and lets no unwinding cross the boundary.
 */
#ifndef ORTMEM_NXMEM_ABI_H
#define ORTMEM_NXMEM_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NXMEM_ABI_VERSION_MAJOR 1u
#define NXMEM_ABI_VERSION_MINOR 1u
#define NXMEM_ABI_VERSION_MINOR_BASELINE 0u

/* Capability bits. ALLOCATOR is mandatory; STRUCTURED_RELEASE exists from
 * minor 1 (the release_allocation slot). */
#define NXMEM_CAP_ALLOCATOR (1ull << 0)
#define NXMEM_CAP_VIRTUAL_BACKING (1ull << 1)
#define NXMEM_CAP_SHARED_MAPPING (1ull << 2)
#define NXMEM_CAP_DEFERRED_RELEASE (1ull << 3)
#define NXMEM_CAP_STRUCTURED_RELEASE (1ull << 4)
#define NXMEM_CAP_KNOWN_MASK 0x1full

/* Status codes are only ever appended; a reader treats a code it does not
 * know as fatal. */
#define NXMEM_STATUS_OK 0u
#define NXMEM_STATUS_VERSION_MISMATCH 1u
#define NXMEM_STATUS_SHORT_STRUCT 2u
#define NXMEM_STATUS_UNSUPPORTED_CAPABILITY 3u
#define NXMEM_STATUS_INVALID_ARGUMENT 4u
#define NXMEM_STATUS_INTERNAL_ERROR 5u
#define NXMEM_STATUS_NOT_IMPLEMENTED 6u
#define NXMEM_STATUS_DEVICE_ERROR 7u
#define NXMEM_STATUS_OUT_OF_MEMORY 8u
#define NXMEM_STATUS_WRONG_DEVICE 9u
#define NXMEM_STATUS_WRONG_MECHANISM 10u
#define NXMEM_STATUS_UNKNOWN_ALLOCATION 11u
#define NXMEM_STATUS_RELEASE_QUARANTINED 12u
#define NXMEM_STATUS_CALLBACK_FAILED 13u
#define NXMEM_STATUS_BUSY 14u
#define NXMEM_STATUS_LAST_KNOWN NXMEM_STATUS_BUSY

/* A message is UTF-8 and NUL-terminated, at most 255 bytes; a reader takes
 * min(message_len, 255) bytes and treats invalid UTF-8 as no message. */
#define NXMEM_STATUS_MESSAGE_MAX 255u

typedef struct NxmemStatus {
  uint32_t code;
  uint32_t message_len;
  uint8_t message[NXMEM_STATUS_MESSAGE_MAX + 1u];
} NxmemStatus;

/* Tiers; a reader refuses a tier it does not know rather than guess one. */
#define NXMEM_TIER_DEVICE 0u
#define NXMEM_TIER_HOST 1u
#define NXMEM_TIER_DISK 2u

typedef struct NxmemDeviceId {
  uint32_t tier;
  uint32_t index;
} NxmemDeviceId;

typedef struct NxmemVersionRange {
  uint32_t major_min;
  uint32_t major_max;
  uint32_t minor_min;
  uint32_t minor_max;
} NxmemVersionRange;

typedef struct NxmemNegotiateRequest {
  uint32_t struct_size;
  uint32_t reserved;
  NxmemVersionRange host_range;
  uint64_t host_capability_flags;
} NxmemNegotiateRequest;

typedef struct NxmemNegotiateResponse {
  uint32_t struct_size;
  uint32_t agreed_major;
  uint32_t agreed_minor;
  uint32_t reserved;
  NxmemVersionRange plugin_range; /* filled even when negotiation fails */
  uint64_t capability_flags;      /* plugin & host & known, less bits above the agreed minor */
} NxmemNegotiateResponse;

/* One allocation as the host names it. allocation_id is the host's: assigned
 * per allocator from 1, never derived from the address. */
typedef struct NxmemAllocation {
  uint32_t struct_size;
  uint32_t reserved;
  uint64_t mechanism_id;
  uint64_t allocation_id;
  NxmemDeviceId device;
  uint8_t* ptr;
  uint64_t bytes;
  uint64_t align;
} NxmemAllocation;

/* Half-open [offset, offset + bytes) within an allocation. */
typedef struct NxmemByteRange {
  uint64_t offset;
  uint64_t bytes;
} NxmemByteRange;

typedef struct NxmemAllocRequest {
  uint32_t struct_size;
  uint32_t reserved;
  uint64_t mechanism_id;
  uint64_t allocation_id;
  NxmemDeviceId device;
  uint64_t bytes;
  uint64_t align;                         /* a power of two */
  const NxmemByteRange* committed_ranges; /* read by allocate_committed only */
  uint64_t committed_range_count;
} NxmemAllocRequest;

typedef struct NxmemAllocResult {
  uint32_t struct_size;
  uint32_t reserved;
  uint8_t* ptr;
  uint64_t owned_bytes;
  uint64_t mapped_bytes;
} NxmemAllocResult;

typedef struct NxmemRangeRequest {
  uint32_t struct_size;
  uint32_t reserved;
  NxmemAllocation allocation;
  NxmemByteRange range;
} NxmemRangeRequest;

/* Release states. COMPLETE may credit unmapped bytes (zero is valid);
 * QUARANTINED keeps residual_owned_bytes and the address is never reissued;
 * FAILED changed nothing. A state the reader does not know is read as a
 * quarantine of the whole allocation: the only reading that cannot free
 * memory still in use. */
#define NXMEM_RELEASE_COMPLETE 0u
#define NXMEM_RELEASE_QUARANTINED 1u
#define NXMEM_RELEASE_FAILED 2u

typedef struct NxmemReleaseOutcome {
  uint32_t struct_size;
  uint32_t state;
  uint64_t allocation_bytes;
  uint64_t unmapped_bytes;
  uint64_t residual_owned_bytes;
  NxmemStatus failure;
} NxmemReleaseOutcome;

typedef struct NxmemReleaseCompletion {
  uint32_t struct_size;
  uint32_t reserved;
  uint64_t ticket;
  uint64_t mechanism_id;
  uint64_t allocation_id;
  NxmemReleaseOutcome outcome;
} NxmemReleaseCompletion;

typedef struct NxmemReclaimRequest {
  uint32_t struct_size;
  uint32_t reserved;
  uint64_t mechanism_id;
  NxmemDeviceId device;
  uint64_t bytes;
} NxmemReclaimRequest;

/* What still holds the module. Its total is the sum of the five counters;
 * live_views counts prefixes committed into live allocations. */
typedef struct NxmemUnloadReport {
  uint32_t struct_size;
  uint32_t reserved;
  uint64_t live_allocators;
  uint64_t live_allocations;
  uint64_t live_views;
  uint64_t live_capabilities;
  uint64_t queued_releases;
} NxmemUnloadReport;

typedef struct NxmemSharedPrefixHandle {
  uint32_t struct_size;
  uint32_t reserved;
  uint64_t mechanism_id;
  uint64_t handle; /* opaque, non-zero */
  NxmemDeviceId device;
  uint64_t device_ptr;
  uint64_t committed_physical_bytes;
  uint64_t mapped_bytes;
  uint64_t requested_bytes;
} NxmemSharedPrefixHandle;

typedef struct NxmemSharedPrefixCommitRequest {
  uint32_t struct_size;
  uint32_t reserved;
  NxmemSharedPrefixHandle prefix;
  NxmemAllocation allocation;
  uint64_t byte_offset;
} NxmemSharedPrefixCommitRequest;

typedef struct NxmemSharedPrefixCommitInfo {
  uint32_t struct_size;
  uint32_t reserved;
  uint64_t additional_owned_bytes; /* charged on a prefix's first mapping only */
  uint64_t newly_mapped_bytes;
  uint64_t granules;
} NxmemSharedPrefixCommitInfo;

/* The host's side, handed to open_allocator. It stays valid for the
 * allocator's life and for every release queued under it. */
typedef struct NxmemHostCallbacks {
  uint32_t struct_size;
  uint32_t abi_minor;
  void* host_ctx;
  NxmemStatus (*request_reclaim)(void* host_ctx, const NxmemReclaimRequest* request, uint64_t* reclaimed_out);
  /* Once per retired ticket, in enqueue order, with no plugin lock held. */
  NxmemStatus (*release_completed)(void* host_ctx, const NxmemReleaseCompletion* completion);
} NxmemHostCallbacks;

typedef struct NxmemOpenRequest {
  uint32_t struct_size;
  uint32_t abi_minor; /* the negotiated minor: the ceiling for this allocator */
  NxmemDeviceId device;
  uint64_t required_capability_flags;  /* refuse with UNSUPPORTED_CAPABILITY rather than lack one */
  const NxmemHostCallbacks* callbacks; /* may be NULL */
} NxmemOpenRequest;

/* Every slot takes the vtable's ctx first. mechanism_id equals the owning
 * allocator's. */
typedef struct NxmemVirtualBackingVtable {
  uint32_t struct_size;
  uint32_t abi_minor;
  uint64_t mechanism_id;
  void* ctx;
  NxmemStatus (*allocate_committed)(void* ctx, const NxmemAllocRequest* request, NxmemAllocResult* result_out);
  NxmemStatus (*commit_range)(void* ctx, const NxmemRangeRequest* request);
  NxmemStatus (*decommit_range)(void* ctx, const NxmemRangeRequest* request, uint64_t* unmapped_out);
  NxmemStatus (*mapped_bytes_for_ranges)(void* ctx, const NxmemRangeRequest* requests, uint64_t count,
                                         uint64_t* mapped_out);
  /* allocation_id is 0 here: the estimate is for an allocation not yet made. */
  NxmemStatus (*mapped_bytes_for_allocation)(void* ctx, const NxmemAllocRequest* request, uint64_t* mapped_out);
  NxmemStatus (*committed_bytes)(void* ctx, const NxmemAllocation* allocation, uint64_t* committed_out);
} NxmemVirtualBackingVtable;

/* Physical bytes of a prefix live until both its last reference and its last
 * mapping are gone. */
typedef struct NxmemSharedMappingVtable {
  uint32_t struct_size;
  uint32_t abi_minor;
  uint64_t mechanism_id;
  void* ctx;
  NxmemStatus (*create_shared_prefix)(void* ctx, uint64_t mechanism_id, uint64_t bytes,
                                      NxmemSharedPrefixHandle* handle_out);
  NxmemStatus (*retain_shared_prefix)(void* ctx, const NxmemSharedPrefixHandle* handle);
  NxmemStatus (*release_shared_prefix)(void* ctx, const NxmemSharedPrefixHandle* handle);
  /* A foreign prefix is refused, never reported as 0. */
  NxmemStatus (*incremental_owned_bytes)(void* ctx, const NxmemSharedPrefixHandle* handle, uint64_t* bytes_out);
  NxmemStatus (*commit_shared_prefix)(void* ctx, const NxmemSharedPrefixCommitRequest* request,
                                      NxmemSharedPrefixCommitInfo* info_out);
} NxmemSharedMappingVtable;

/* The allocator: 120 bytes at minor 0, 128 from minor 1. allocate,
 * deallocate, retain and release are required; the rest are NULL when
 * unsupported. The name, the vtable and ctx stay valid until the final
 * release. */
typedef struct NxmemAllocatorVtable {
  uint32_t struct_size;
  uint32_t abi_minor;
  uint64_t mechanism_id; /* non-zero */
  NxmemDeviceId device;
  uint64_t capability_flags;
  const uint8_t* name; /* optional */
  void* ctx;
  NxmemStatus (*allocate)(void* ctx, const NxmemAllocRequest* request, NxmemAllocResult* result_out);
  NxmemStatus (*deallocate)(void* ctx, const NxmemAllocation* allocation, uint64_t* unmapped_bytes_out);
  void (*retain)(void* ctx);
  void (*release)(void* ctx);
  const NxmemVirtualBackingVtable* virtual_backing; /* non-NULL exactly when the flag is set */
  const NxmemSharedMappingVtable* shared_mapping;   /* non-NULL exactly when the flag is set */
  NxmemStatus (*enqueue_release)(void* ctx, const NxmemAllocation* allocation, uint64_t* ticket_out);
  NxmemStatus (*drain_releases)(void* ctx, uint64_t max, uint64_t* retired_out);
  NxmemStatus (*pending_release_count)(void* ctx, uint64_t* count_out);
  /* Minor 1: the structured release, used only with STRUCTURED_RELEASE. */
  NxmemStatus (*release_allocation)(void* ctx, const NxmemAllocation* allocation, NxmemReleaseOutcome* outcome_out);
} NxmemAllocatorVtable;

/* A factory. Its name is required and outlives it; releasing it must not
 * invalidate the allocators it opened. */
typedef struct NxmemAllocatorFactoryVtable {
  uint32_t struct_size;
  uint32_t abi_minor;
  const uint8_t* name;
  NxmemDeviceId device;
  uint64_t capability_flags;
  void* ctx;
  NxmemStatus (*open_allocator)(void* ctx, const NxmemOpenRequest* request, const NxmemAllocatorVtable** allocator_out);
  void (*release)(void* ctx);
} NxmemAllocatorFactoryVtable;

/* The three exports; a library missing one is refused at load. */
NxmemStatus NxmemNegotiate(const NxmemNegotiateRequest* request, NxmemNegotiateResponse* response_out);
NxmemStatus NxmemCreateAllocatorFactories(const NxmemAllocatorFactoryVtable** out_factories, uint64_t max_factories,
                                          uint64_t* out_count);
NxmemStatus NxmemQueryUnloadReadiness(NxmemUnloadReport* report_out);

#define NXMEM_ALLOCATOR_VTABLE_SIZE_MINOR0 120u

/* The layout facts, checked where the header is compiled (64-bit targets). */
#if defined(__cplusplus)
#define NXMEM_ABI_ASSERT(cond, what) static_assert(cond, what)
#else
#define NXMEM_ABI_ASSERT(cond, what) _Static_assert(cond, what)
#endif
#if UINTPTR_MAX == 0xffffffffffffffffu
NXMEM_ABI_ASSERT(sizeof(NxmemStatus) == 264 && offsetof(NxmemStatus, message) == 8, "NxmemStatus layout");
NXMEM_ABI_ASSERT(sizeof(NxmemDeviceId) == 8, "NxmemDeviceId layout");
NXMEM_ABI_ASSERT(sizeof(NxmemVersionRange) == 16, "NxmemVersionRange layout");
NXMEM_ABI_ASSERT(sizeof(NxmemNegotiateRequest) == 32 && offsetof(NxmemNegotiateRequest, host_range) == 8 &&
                     offsetof(NxmemNegotiateRequest, host_capability_flags) == 24,
                 "NxmemNegotiateRequest layout");
NXMEM_ABI_ASSERT(sizeof(NxmemNegotiateResponse) == 40 && offsetof(NxmemNegotiateResponse, plugin_range) == 16 &&
                     offsetof(NxmemNegotiateResponse, capability_flags) == 32,
                 "NxmemNegotiateResponse layout");
NXMEM_ABI_ASSERT(sizeof(NxmemAllocation) == 56 && offsetof(NxmemAllocation, device) == 24 &&
                     offsetof(NxmemAllocation, ptr) == 32 && offsetof(NxmemAllocation, align) == 48,
                 "NxmemAllocation layout");
NXMEM_ABI_ASSERT(sizeof(NxmemByteRange) == 16, "NxmemByteRange layout");
NXMEM_ABI_ASSERT(sizeof(NxmemAllocRequest) == 64 && offsetof(NxmemAllocRequest, bytes) == 32 &&
                     offsetof(NxmemAllocRequest, committed_ranges) == 48,
                 "NxmemAllocRequest layout");
NXMEM_ABI_ASSERT(sizeof(NxmemAllocResult) == 32 && offsetof(NxmemAllocResult, ptr) == 8, "NxmemAllocResult layout");
NXMEM_ABI_ASSERT(sizeof(NxmemRangeRequest) == 80 && offsetof(NxmemRangeRequest, range) == 64,
                 "NxmemRangeRequest layout");
NXMEM_ABI_ASSERT(sizeof(NxmemReleaseOutcome) == 296 && offsetof(NxmemReleaseOutcome, failure) == 32,
                 "NxmemReleaseOutcome layout");
NXMEM_ABI_ASSERT(sizeof(NxmemReleaseCompletion) == 328 && offsetof(NxmemReleaseCompletion, outcome) == 32,
                 "NxmemReleaseCompletion layout");
NXMEM_ABI_ASSERT(sizeof(NxmemReclaimRequest) == 32 && offsetof(NxmemReclaimRequest, bytes) == 24,
                 "NxmemReclaimRequest layout");
NXMEM_ABI_ASSERT(sizeof(NxmemUnloadReport) == 48, "NxmemUnloadReport layout");
NXMEM_ABI_ASSERT(sizeof(NxmemSharedPrefixHandle) == 64 && offsetof(NxmemSharedPrefixHandle, device_ptr) == 32,
                 "NxmemSharedPrefixHandle layout");
NXMEM_ABI_ASSERT(sizeof(NxmemSharedPrefixCommitRequest) == 136 &&
                     offsetof(NxmemSharedPrefixCommitRequest, allocation) == 72 &&
                     offsetof(NxmemSharedPrefixCommitRequest, byte_offset) == 128,
                 "NxmemSharedPrefixCommitRequest layout");
NXMEM_ABI_ASSERT(sizeof(NxmemSharedPrefixCommitInfo) == 32, "NxmemSharedPrefixCommitInfo layout");
NXMEM_ABI_ASSERT(sizeof(NxmemHostCallbacks) == 32 && offsetof(NxmemHostCallbacks, release_completed) == 24,
                 "NxmemHostCallbacks layout");
NXMEM_ABI_ASSERT(sizeof(NxmemOpenRequest) == 32 && offsetof(NxmemOpenRequest, callbacks) == 24,
                 "NxmemOpenRequest layout");
NXMEM_ABI_ASSERT(sizeof(NxmemVirtualBackingVtable) == 72 &&
                     offsetof(NxmemVirtualBackingVtable, allocate_committed) == 24 &&
                     offsetof(NxmemVirtualBackingVtable, committed_bytes) == 64,
                 "NxmemVirtualBackingVtable layout");
NXMEM_ABI_ASSERT(sizeof(NxmemSharedMappingVtable) == 64 &&
                     offsetof(NxmemSharedMappingVtable, commit_shared_prefix) == 56,
                 "NxmemSharedMappingVtable layout");
NXMEM_ABI_ASSERT(sizeof(NxmemAllocatorVtable) == 128 && offsetof(NxmemAllocatorVtable, ctx) == 40 &&
                     offsetof(NxmemAllocatorVtable, allocate) == 48 &&
                     offsetof(NxmemAllocatorVtable, pending_release_count) == 112 &&
                     offsetof(NxmemAllocatorVtable, release_allocation) == NXMEM_ALLOCATOR_VTABLE_SIZE_MINOR0,
                 "NxmemAllocatorVtable layout");
NXMEM_ABI_ASSERT(sizeof(NxmemAllocatorFactoryVtable) == 56 &&
                     offsetof(NxmemAllocatorFactoryVtable, open_allocator) == 40,
                 "NxmemAllocatorFactoryVtable layout");
#endif
#undef NXMEM_ABI_ASSERT

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ORTMEM_NXMEM_ABI_H */
