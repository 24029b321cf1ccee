/* adapters/plugin/known_bad/load_time_lies.c: known-bad nxmem plugins that
 * break one rule of loading, negotiation or vtable layout.
 *
 * Each is the eager example plugin with exactly one lie, chosen at compile
 * time by LIE (one library per lie; manifest.json lists them with the words
 * the kit's refusal must contain). The example is included, its exports
 * renamed, and wrapped: a lie is told on the way out of an otherwise honest
 * call, so the kit has nothing to catch but that one lie.
 */
#define NxmemNegotiate honest_negotiate
#define NxmemCreateAllocatorFactories honest_create_factories
#define NxmemQueryUnloadReadiness honest_query_unload
#include "plugin/examples/eager_host_plugin.c"
#undef NxmemNegotiate
#undef NxmemCreateAllocatorFactories
#undef NxmemQueryUnloadReadiness

#define LIE_NONE 0
#define LIE_NO_UNLOAD_EXPORT 1
#define LIE_AGREED_MINOR_OUT_OF_RANGE 2
#define LIE_NO_ALLOCATOR_BIT 3
#define LIE_STRUCTURED_AT_MINOR_0 4
#define LIE_UNKNOWN_CAPABILITY_BIT 5
#define LIE_TOO_MANY_FACTORIES 6
#define LIE_NULL_FACTORY_IN_COUNT 7
#define LIE_UNNAMED_FACTORY 8
#define LIE_FACTORY_UNKNOWN_TIER 9
#define LIE_SHORT_VTABLE 10
#define LIE_MECHANISM_ID_ZERO 11
#define LIE_NULL_REQUIRED_SLOT 12
#define LIE_FLAG_WITHOUT_POINTER 13
#define LIE_POINTER_WITHOUT_FLAG 14
#define LIE_VTABLE_ON_ANOTHER_DEVICE 15
#define LIE_SHORT_FACTORY 16
/* The control extension's table (ortmem_cts_controls.h), which the eager
 * example does not export: each of these exports one, wrong in one way. */
#define LIE_CONTROLS_ENTRY_FAILS 17
#define LIE_CONTROLS_SHORT_TABLE 18
#define LIE_CONTROLS_OTHER_MECHANISM 19
#define LIE_CONTROLS_UNKNOWN_BIT 20
#define LIE_CONTROLS_BIT_WITHOUT_SLOT 21
#define LIE_CONTROLS_SLOT_WITHOUT_BIT 22
#define LIE_CONTROLS_QUEUE_WITHOUT_DEFERRED 23
#define LIE_CONTROLS_RESERVED_SET 24

#ifndef LIE
#error "LIE must name the one rule this plugin breaks"
#endif

NxmemStatus NxmemNegotiate(const NxmemNegotiateRequest* request, NxmemNegotiateResponse* response) {
  NxmemStatus answer = honest_negotiate(request, response);
#if LIE == LIE_AGREED_MINOR_OUT_OF_RANGE
  response->agreed_minor = 7;
#elif LIE == LIE_NO_ALLOCATOR_BIT
  response->capability_flags = 0;
#elif LIE == LIE_STRUCTURED_AT_MINOR_0
  response->capability_flags |= NXMEM_CAP_STRUCTURED_RELEASE;
#elif LIE == LIE_UNKNOWN_CAPABILITY_BIT
  response->capability_flags |= 1ull << 9;
#endif
  return answer;
}

/* Copies of the honest factory and of each vtable it opens, with the lie in
 * them. Static storage: the kit only reads them. */
static NxmemAllocatorFactoryVtable lying_factory;
static NxmemAllocatorVtable lying_vtable;
#if LIE == LIE_POINTER_WITHOUT_FLAG
static const NxmemVirtualBackingVtable stray_virtual_backing = {
    sizeof(NxmemVirtualBackingVtable), 0, MECHANISM_ID, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
#endif

static NxmemStatus lying_open(void* ctx, const NxmemOpenRequest* request, const NxmemAllocatorVtable** out) {
  const NxmemAllocatorVtable* honest = NULL;
  NxmemStatus answer = factory.open_allocator(ctx, request, &honest);
  if (answer.code != NXMEM_STATUS_OK) return answer;
  lying_vtable = *honest;
#if LIE == LIE_SHORT_VTABLE
  lying_vtable.struct_size = 100;
#elif LIE == LIE_MECHANISM_ID_ZERO
  lying_vtable.mechanism_id = 0;
#elif LIE == LIE_NULL_REQUIRED_SLOT
  lying_vtable.deallocate = NULL;
#elif LIE == LIE_FLAG_WITHOUT_POINTER
  lying_vtable.capability_flags |= NXMEM_CAP_VIRTUAL_BACKING;
#elif LIE == LIE_POINTER_WITHOUT_FLAG
  lying_vtable.virtual_backing = &stray_virtual_backing;
#elif LIE == LIE_VTABLE_ON_ANOTHER_DEVICE
  lying_vtable.device.index = 3;
#endif
  *out = &lying_vtable;
  return answer;
}

NxmemStatus NxmemCreateAllocatorFactories(const NxmemAllocatorFactoryVtable** out, uint64_t max, uint64_t* count) {
  NxmemStatus answer = honest_create_factories(out, max, count);
  lying_factory = factory;
  lying_factory.open_allocator = lying_open;
#if LIE == LIE_UNNAMED_FACTORY
  lying_factory.name = NULL;
#elif LIE == LIE_FACTORY_UNKNOWN_TIER
  lying_factory.device.tier = 9;
#elif LIE == LIE_SHORT_FACTORY
  lying_factory.struct_size = 48;
#endif
  out[0] = &lying_factory;
#if LIE == LIE_TOO_MANY_FACTORIES
  *count = max + 1;
#elif LIE == LIE_NULL_FACTORY_IN_COUNT
  *count = 2;
#endif
  return answer;
}

#if LIE != LIE_NO_UNLOAD_EXPORT
NxmemStatus NxmemQueryUnloadReadiness(NxmemUnloadReport* report) { return honest_query_unload(report); }
#endif

#if LIE >= LIE_CONTROLS_ENTRY_FAILS
#include "nxmem/ortmem_cts_controls.h"

static NxmemStatus no_op(void* ctx) {
  (void)ctx;
  return example_status(NXMEM_STATUS_OK, "");
}
static NxmemStatus arm_nothing(void* ctx, uint32_t point, uint64_t nth) {
  (void)ctx;
  (void)point;
  (void)nth;
  return example_status(NXMEM_STATUS_NOT_IMPLEMENTED, "no fault points");
}
#if LIE == LIE_CONTROLS_QUEUE_WITHOUT_DEFERRED
static NxmemStatus open_nothing(void* ctx, uint64_t capacity) {
  (void)ctx;
  (void)capacity;
  return example_status(NXMEM_STATUS_OK, "");
}
#endif

/* Honest but for the lie: fault injection with no points, which the eager
 * allocator may offer. */
static OrtmemCtsControls lying_controls = {
    .struct_size = sizeof(OrtmemCtsControls),
    .version = ORTMEM_CTS_CONTROLS_VERSION,
    .mechanism_id = MECHANISM_ID,
    .controls = ORTMEM_CTS_CONTROL_FAULT_INJECTION,
    .arm_fault = arm_nothing,
    .clear_faults = no_op,
};

NxmemStatus OrtmemCtsPluginControls(uint32_t kit_version, uint64_t mechanism_id, const OrtmemCtsControls** out) {
  (void)kit_version;
  (void)mechanism_id;
#if LIE == LIE_CONTROLS_ENTRY_FAILS
  return example_status(NXMEM_STATUS_INTERNAL_ERROR, "the table is not ready");
#elif LIE == LIE_CONTROLS_SHORT_TABLE
  lying_controls.struct_size = 64;
#elif LIE == LIE_CONTROLS_OTHER_MECHANISM
  lying_controls.mechanism_id = MECHANISM_ID + 1;
#elif LIE == LIE_CONTROLS_UNKNOWN_BIT
  lying_controls.controls |= 1ull << 7;
#elif LIE == LIE_CONTROLS_BIT_WITHOUT_SLOT
  lying_controls.clear_faults = NULL;
#elif LIE == LIE_CONTROLS_SLOT_WITHOUT_BIT
  lying_controls.close_queue = no_op;
#elif LIE == LIE_CONTROLS_QUEUE_WITHOUT_DEFERRED
  lying_controls.controls |= ORTMEM_CTS_CONTROL_QUEUE_CAPACITY;
  lying_controls.open_queue = open_nothing;
#elif LIE == LIE_CONTROLS_RESERVED_SET
  lying_controls.reserved = 1;
#endif
  *out = &lying_controls;
  return example_status(NXMEM_STATUS_OK, "");
}
#endif
