/* nxmem/ortmem_cts_controls.h: the ortmem-cts control extension,
 * version 1, an optional export of an nxmem plugin.
 *
 * The nxmem ABI gives a host no way to drive what a conformance check must
 * drive: it cannot hold a queued release behind device work, close or bound
 * a queue, lose the device, make one system call fail, or read memory the
 * host cannot address. A plugin judged through the ABI alone is therefore
 * judged on part of the contract (the rest is reported out of nxmem scope).
 * A plugin that also exports OrtmemCtsPluginControls offers those controls
 * for its mechanisms, and the kit certifies them in full. The runtime never
 * calls this export: it is for certification only, and a plugin ships it
 * at no cost to the runtime's paths.
 *
 * spec/controls.md states the same rules with their reasons; the kit
 * refuses at load (exit 2, one line naming the rule and the field) a table
 * that breaks one of the rules marked "load".
 *
 * The export:
 *
 *   NxmemStatus OrtmemCtsPluginControls(uint32_t kit_version, uint64_t mechanism_id,
 *                                       const OrtmemCtsControls** controls_out);
 *
 * returns OK and a table for the mechanism (the allocator vtable's
 * mechanism_id) whose controls the plugin offers; NOT_IMPLEMENTED for a
 * mechanism it offers none for. kit_version is the highest table version the
 * kit reads (1 here). The table is the plugin's, static or living until the
 * module is unloaded; the kit only reads it.
 *
 * Rules of the table (load):
 *  - struct_size is at least ORTMEM_CTS_CONTROLS_SIZE_V1; version is at
 *    least 1. Later versions only append slots; the kit copies what it knows
 *    into a zeroed local, as for every nxmem struct.
 *  - mechanism_id is the one asked for; reserved is zero.
 *  - controls has no bit outside ORTMEM_CTS_CONTROL_KNOWN_MASK.
 *  - A control bit is set exactly when its slots are set (open_queue belongs
 *    to every queue control): a bit without its slots, or a slot without its
 *    bit, is refused.
 *  - The queue controls (FENCES, QUEUE_CLOSE, QUEUE_CAPACITY,
 *    QUEUE_DEVICE_LOSS) need the factory to declare DEFERRED_RELEASE.
 *
 * Rules of the calls (checked by the deferred, virtual and shared suites,
 * which these controls bring into scope):
 *  - Every slot takes the ctx of an allocator vtable of this mechanism. The
 *    queue and fault slots act on that allocator alone (nxmem keeps each
 *    allocator's release queue in the allocator); the memory slots serve
 *    memory any allocator of the mechanism handed out, whichever one's ctx
 *    they are given. Slots may be called from any thread, never under a lock
 *    the plugin holds across a host callback.
 *  - A slot returns OK, or a status saying why not; a non-OK answer from a
 *    control the table offers fails the test that needed it.
 */
#ifndef ORTMEM_CTS_CONTROLS_H
#define ORTMEM_CTS_CONTROLS_H

#include <stdint.h>

#include "nxmem/nxmem_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ORTMEM_CTS_CONTROLS_EXPORT "OrtmemCtsPluginControls"
#define ORTMEM_CTS_CONTROLS_VERSION 1u

/* What a table offers. Each names the kit's control of the same name
 * (spec/README.md, "Surfaces and scope"). */
#define ORTMEM_CTS_CONTROL_FENCES (1ull << 0)
#define ORTMEM_CTS_CONTROL_QUEUE_CLOSE (1ull << 1)
#define ORTMEM_CTS_CONTROL_QUEUE_CAPACITY (1ull << 2)
#define ORTMEM_CTS_CONTROL_QUEUE_DEVICE_LOSS (1ull << 3)
#define ORTMEM_CTS_CONTROL_FAULT_INJECTION (1ull << 4)
#define ORTMEM_CTS_CONTROL_MEMORY_ACCESS (1ull << 5)
#define ORTMEM_CTS_CONTROL_KNOWN_MASK 0x3full

/* Fault points, named by what they do to the contract. A fault counts unit
 * steps: one granule (or the plugin's finest unit) of a release's unmap, of
 * a commit, of a decommit, or of mapping a shared prefix into a target. */
#define ORTMEM_CTS_FAULT_RELEASE_UNMAP 0u
#define ORTMEM_CTS_FAULT_COMMIT 1u
#define ORTMEM_CTS_FAULT_DECOMMIT 2u
#define ORTMEM_CTS_FAULT_PREFIX_MAP 3u

/* How a probed write ended (probe_write). */
#define ORTMEM_CTS_WRITE_REFUSED 0u
#define ORTMEM_CTS_WRITE_ALLOWED 1u
#define ORTMEM_CTS_WRITE_UNKNOWN 2u

typedef struct OrtmemCtsControls {
  uint32_t struct_size;
  uint32_t version;
  uint64_t mechanism_id;
  uint64_t controls; /* ORTMEM_CTS_CONTROL_* bits */
  uint64_t reserved;

  /* The queue. The kit starts each queue it certifies with open_queue on
   * every allocator it hands releases to: from then on the allocator's queue
   * is open, not lost, holds no fence, and is bounded by `capacity` tickets
   * (0: unbounded). BUSY while tickets of an earlier queue are pending.
   * With QUEUE_CAPACITY the plugin keeps exactly the bound asked; without
   * it the kit asks for 0.
   *
   * An opened queue is the kit's to drive: its tickets retire only inside
   * the kit's calls (enqueue_release, drain_releases, lose_device, the
   * final release), never on the plugin's own schedule, so that what the
   * kit reads between two of its calls (pending counts, the registry's
   * queued count, what has settled) holds still. A plugin with a worker
   * thread stands it down for this queue. (The ABI probes certify the
   * plugin's own schedule, on queues the kit never opened.)
   *
   * enqueue_release refuses, with nothing changed (the allocation stays
   * live), in this precedence: a lost queue with DEVICE_ERROR, a closed one
   * with UNSUPPORTED_CAPABILITY (deferred release is no longer offered), a
   * full one with BUSY. Any other refusal is read as the plugin's own. */
  NxmemStatus (*open_queue)(void* allocator_ctx, uint64_t capacity);

  /* FENCES. record_use submits device work that uses the allocator's
   * memory; every ticket enqueued after it, until signal_fences, waits for
   * that work and must not be retired (nor its memory freed) before
   * signal_fences lets all submitted work finish. With FENCES, drain_releases
   * returns only once every ticket whose fence had passed when it was called
   * has been completed, by it or by another thread: the kit's drain then
   * waits for nothing else. */
  NxmemStatus (*record_use)(void* allocator_ctx);
  NxmemStatus (*signal_fences)(void* allocator_ctx);

  /* QUEUE_CLOSE. From now on enqueue_release refuses (see open_queue). What
   * is pending stays pending and retires as before. */
  NxmemStatus (*close_queue)(void* allocator_ctx);

  /* QUEUE_DEVICE_LOSS. The allocator's device is lost: before this call
   * returns, every pending ticket is completed, fence or not, with state
   * QUARANTINED, failure DEVICE_ERROR, unmapped_bytes 0 and
   * residual_owned_bytes the allocation's bytes, and its memory is not
   * released (a lost device's memory is gone with its context; a host-tier
   * plugin keeps it mapped until the allocator's final release). From now
   * on enqueue_release refuses with DEVICE_ERROR. */
  NxmemStatus (*lose_device)(void* allocator_ctx);

  /* FAULT_INJECTION. Makes the `nth` next unit step behind `point` (1: the
   * very next) of this allocator fail as the system call behind it would.
   * NOT_IMPLEMENTED for a point the plugin has no step behind. A fault
   * affects only the step it was armed for; clear_faults disarms every
   * point. The failed call must then do what the contract says of a failure
   * there (roll back, or report a partial release honestly). */
  NxmemStatus (*arm_fault)(void* allocator_ctx, uint32_t point, uint64_t nth);
  NxmemStatus (*clear_faults)(void* allocator_ctx);

  /* MEMORY_ACCESS, for memory the host cannot address (a tier other than
   * host): the kit reads and writes allocation bytes through these, and
   * never through the pointer. `address` lies in memory an allocator of
   * this mechanism handed out (an allocation, or a shared prefix's owner
   * window). probe_write says how a one-byte write of `value` through
   * `address` would end, from the system's own record of the mapping
   * (never from what the plugin believes it asked for), without harming the
   * process; it may be NULL (the kit then leaves the write-protection check
   * unrun). A host-tier mechanism's bytes are read by the kit directly, so
   * it need not offer these. */
  NxmemStatus (*fill)(void* allocator_ctx, uint8_t* address, uint64_t bytes, uint8_t value);
  NxmemStatus (*read)(void* allocator_ctx, const uint8_t* address, uint8_t* out, uint64_t bytes);
  NxmemStatus (*probe_write)(void* allocator_ctx, uint8_t* address, uint8_t value, uint32_t* outcome_out);
} OrtmemCtsControls;

typedef NxmemStatus (*OrtmemCtsPluginControlsFn)(uint32_t kit_version, uint64_t mechanism_id,
                                                 const OrtmemCtsControls** controls_out);

#define ORTMEM_CTS_CONTROLS_SIZE_V1 ((uint32_t)sizeof(OrtmemCtsControls))

#if UINTPTR_MAX == 0xffffffffffffffffu
#if defined(__cplusplus)
static_assert(sizeof(OrtmemCtsControls) == 112, "OrtmemCtsControls layout");
#else
_Static_assert(sizeof(OrtmemCtsControls) == 112, "OrtmemCtsControls layout");
#endif
#endif

#ifdef __cplusplus
}
#endif

#endif /* ORTMEM_CTS_CONTROLS_H */
