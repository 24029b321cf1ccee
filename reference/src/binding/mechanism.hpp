// mechanism.hpp (internal): one registered allocator, its records and its
// lifecycle.
//
// Everything an allocate or a release counts lives in the sharded RecordTable,
// under the shard's lock: live records, queued releases (a prepared release
// is an active operation until it settles) and open operations, each in the
// shard of the thread that made it. The lifecycle is one atomic, turned only
// under the mechanism lock (with the loss reason) and read under a shard lock
// in the same step that counts or takes something there. A confirmation or a
// snapshot reads the lifecycle first and then each shard under its lock, so:
//   - an operation or a take either finished its shard step before the
//     confirmation read that shard, and is counted, or read the lifecycle
//     after the turn to device-lost, and was refused;
//   - an allocation leaves the active count in the same step that makes its
//     record live, and a release leaves the live count in the step that makes
//     it queued, so the live, queued and active figures never all read zero
//     while one is under way.
// Counting in the caller's own shard, rather than in one word of the
// mechanism, is what lets two threads on one binding run without writing a
// common cache line.
//
// The mechanism lock guards the lifecycle transitions (with the loss reason),
// quarantined ownership and the poisoned flag. Lock order: the mechanism lock
// may be held while a shard lock is taken, never the reverse. No lock here is
// held together with the registry lock or across a callback: every method
// either reads or updates records and returns, and callers make allocator
// calls after.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ortmem/allocator.hpp"
#include "ortmem/binding_error.hpp"
#include "ortmem/binding_identity.hpp"
#include "active_operation.hpp"
#include "check_result.hpp"
#include "ortmem/detail/lock_guard.hpp"
#include "ortmem/detail/mutex.hpp"
#include "ortmem/mechanism_snapshot.hpp"
#include "record_table.hpp"

namespace ortmem::detail {

// A registered provider context or authority: an identity, a device and the
// provider's resource, kept alive by every mechanism that uses it.
template <class Id>
struct RegisteredResource {
  Id identity;
  DeviceKey device;
  std::shared_ptr<const void> resource;
};

enum class TakeResult : std::uint8_t { kTaken, kStale, kInactive };

class Mechanism : public std::enable_shared_from_this<Mechanism> {
 public:
  // Declared so that destruction runs allocator, then authority, then context:
  // an allocator's destructor may still need both (a CUDA context, a library).
  struct Resources {
    std::shared_ptr<RegisteredResource<ProviderContextIdentity>> context;
    std::shared_ptr<RegisteredResource<AuthorityIdentity>> authority;
    std::shared_ptr<DeviceAllocator> allocator;
  };

  // What a prepared release may do, read once and acted on after.
  enum class Gate : std::uint8_t { kAllowed, kDeviceLost, kTerminated, kPoisoned };

  // The pointer the registry and bindings hold. Handles (owners, metadata,
  // requests) hold the mechanism through per-shard anchors instead, so two
  // threads allocating on one binding never update a common reference count:
  // a shared_ptr copy is an atomic read-modify-write, and one count written
  // by every allocation and release is a cache line the threads pass back and
  // forth. The mechanism lives while this pointer or any handle does.
  [[nodiscard]] static std::shared_ptr<Mechanism> make(MechanismIdentity identity, DeviceKey device,
                                                       MechanismCoherence coherence, Resources resources,
                                                       std::shared_ptr<IdentityIssuer> identities);
  // Public for make_shared only: use make().
  Mechanism(MechanismIdentity identity, DeviceKey device, MechanismCoherence coherence, Resources resources,
            std::shared_ptr<IdentityIssuer> identities);
  Mechanism(const Mechanism&) = delete;
  Mechanism& operator=(const Mechanism&) = delete;

  [[nodiscard]] MechanismIdentity identity() const noexcept { return identity_; }
  [[nodiscard]] DeviceKey device() const noexcept { return device_; }
  [[nodiscard]] MechanismCoherence coherence() const noexcept { return coherence_; }
  [[nodiscard]] ProviderContextIdentity context() const noexcept { return resources_.context->identity; }
  [[nodiscard]] AuthorityIdentity authority() const noexcept { return resources_.authority->identity; }
  [[nodiscard]] DeviceAllocator& allocator() const noexcept { return *resources_.allocator; }
  // A binding's whole identity: its own id and generation, and what it names of this mechanism.
  [[nodiscard]] BindingIdentity binding_identity(BindingId id, BindingGeneration generation) const noexcept {
    return {id, generation, device_, identity_, context(), authority()};
  }
  [[nodiscard]] AllocationIdentity allocation_identity(const AllocationName& name) const noexcept {
    return {binding_identity(name.binding(), name.binding_generation()), name.generation()};
  }
  // What a handle that pins `mechanism` reports as its allocation's identity:
  // a moved-from handle pins nothing, and names nothing.
  [[nodiscard]] static AllocationIdentity allocation_identity(const std::shared_ptr<Mechanism>& mechanism,
                                                              const AllocationName& name) noexcept {
    return mechanism ? mechanism->allocation_identity(name) : AllocationIdentity{};
  }

  // Opens an operation if the mechanism is active; `operation` names it in refusals.
  [[nodiscard]] Expected<ActiveOperation, BindingError> begin_active(std::string_view operation);
  // The allocate and release steps of the owning cycle, inline: each is one
  // critical section of one shard, and its refusals are built out of line
  // by the caller from what it reports, so the path that succeeds carries no
  // error in its frame. begin_active() and take_for_release() are the
  // same steps for callers off that path.
  //
  // An operation opened in the calling thread's shard (`home`), or refused
  // (`shard` null) by the lifecycle read in the same step.
  struct Opened {
    RecordShard* shard;
    std::uint32_t home;
    MechanismLifecycle lifecycle;
  };
  [[nodiscard]] Opened open_operation() noexcept {
    // Every count starts here, in the opening thread's shard (see published_totals).
    const std::uint32_t home = RecordTable::home_shard();
    RecordShard& shard = records_.home_in_use(home);
    // Counted in the same step that checks the lifecycle, so a confirmation
    // that saw the mechanism lost also sees every operation that started
    // while it was active, and a refused operation is never counted.
    const LockGuard lock(shard.guard);
    const MechanismLifecycle lifecycle = lifecycle_.load(std::memory_order_acquire);
    if (lifecycle != MechanismLifecycle::kActive) return {nullptr, home, lifecycle};
    shard.active.raise();
    return {&shard, home, lifecycle};
  }
  enum class Recorded : std::uint8_t { kLive, kNoGeneration, kNoMemory };
  // Records `record` in shard `home`, where `operation` counts, and ends the
  // operation in the same step; while a Recording that recorded lives, it
  // holds that shard's lock, so that the handle naming the new record is
  // built in that same step, taking its reference to the mechanism from the
  // shard's anchor where it stands (owner()). Passed through a temporary,
  // that reference was written in two stores and read back in one wider
  // load, which waits for both to retire (a third of the allocate path's
  // time). Build nothing else while it lives: no call out, no allocation.
  // Anything but kLive changed nothing, let the lock go at once, and left
  // the operation open: the caller still hands the memory back inside it.
  class Recording {
   public:
    // The lock is the shard's, chosen at run time, so the analysis cannot
    // follow it through this object: record_locked() states what it needs.
    [[gnu::always_inline]] Recording(Mechanism& mechanism, std::uint32_t home, const AllocationRecord& record,
                                     ActiveOperation& operation) noexcept ORTMEM_NO_THREAD_SAFETY_ANALYSIS
        : mechanism_(mechanism),
          shard_(mechanism.records_.shard(home)),
          lock_(shard_.guard),
          slot_{home, RecordShard::kNoSlot} {
      result_ = mechanism.record_locked(shard_, record, operation, generation_, slot_.index);
      if (result_ != Recorded::kLive) lock_.unlock();
    }
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;
    ~Recording() = default;

    [[nodiscard]] Recorded result() const noexcept { return result_; }
    [[nodiscard]] AllocationGeneration generation() const noexcept { return generation_; }
    [[nodiscard]] RecordSlot slot() const noexcept { return slot_; }
    // What a handle of the new record shares its reference count with: the
    // shard's anchor (see Mechanism::make). Only while recorded.
    [[nodiscard]] const std::shared_ptr<const void>& owner() ORTMEM_NO_THREAD_SAFETY_ANALYSIS {
      if (shard_.handle_anchor) [[likely]] {
        return shard_.handle_anchor;
      }
      // Anchors are gone only once no binding is left, and recording needs
      // one; should that change, a plain reference is still right, only shared.
      fallback_ = mechanism_.shared_from_this();
      return fallback_;
    }

   private:
    Mechanism& mechanism_;
    RecordShard& shard_;
    LockGuard<SpinLock> lock_;
    Recorded result_ = Recorded::kLive;
    AllocationGeneration generation_;
    RecordSlot slot_;
    std::shared_ptr<const void> fallback_;
  };
  // Why a Recording refused, as the allocate path reports it.
  [[nodiscard, gnu::cold]] BindingError record_error(Recorded refusal, std::size_t bytes) const;
  using Taken = TakeResult;
  // Removes the live record exactly once and counts a queued release, which
  // is also an active operation until it settles, if the lifecycle (read
  // into `lifecycle` in the same step) is active or retired and the record
  // matches; otherwise changes nothing. The caller has checked that the
  // name is of this registry and of the binding it releases through.
  [[nodiscard, gnu::always_inline]] Taken take_record(const AllocationName& name, RecordSlot slot,
                                                      const AllocationRecord& expected,
                                                      MechanismLifecycle& lifecycle) noexcept {
    RecordShard& shard = records_.shard(slot.shard);
    // The lifecycle is read under the shard lock that the count is raised
    // under (see the top of this file on why a confirmation then misses no take).
    const LockGuard lock(shard.guard);
    // Lifecycle before staleness, as the refusals are ranked.
    lifecycle = lifecycle_.load(std::memory_order_acquire);
    if (lifecycle != MechanismLifecycle::kActive && lifecycle != MechanismLifecycle::kRetired) {
      return Taken::kInactive;
    }
    const AllocationRecord* found = shard.find(slot.index, name.generation_serial());
    if (found == nullptr || !matches(*found, expected)) return Taken::kStale;
    // Removing the record under this lock is what makes release exactly-once:
    // a second racer finds nothing and is told its metadata is stale.
    // Queued before it leaves the live count, so an unlocked snapshot that
    // reads live first finds it in one of the two (PublishedCount).
    shard.queued.raise();
    shard.erase(slot.index);
    return Taken::kTaken;
  }
  // Why take_record refused.
  [[nodiscard, gnu::cold]] BindingError take_error(Taken refusal, MechanismLifecycle lifecycle,
                                                   const AllocationName& name);
  // The refusal for an operation that found the mechanism `lifecycle`.
  [[nodiscard, gnu::cold]] BindingError inactive_error(MechanismLifecycle lifecycle, std::string_view operation);

  // Checks that metadata still names its live record (mechanism active).
  [[nodiscard]] CheckResult validate(BindingId through, const AllocationName& name, RecordSlot slot,
                                     const AllocationRecord& expected, std::string_view operation);
  // Removes the live record exactly once and counts a queued release, which
  // is also an active operation until it settles; refused (nothing changed)
  // unless active or retired and the record matches.
  [[nodiscard]] CheckResult take_for_release(BindingId through, const AllocationName& name, RecordSlot slot,
                                             const AllocationRecord& expected);
  [[nodiscard]] Gate release_gate() const noexcept {
    if (poisoned_.load(std::memory_order_acquire)) return Gate::kPoisoned;
    switch (lifecycle_.load(std::memory_order_acquire)) {
      case MechanismLifecycle::kActive:
      case MechanismLifecycle::kRetired: return Gate::kAllowed;
      case MechanismLifecycle::kDeviceLost: return Gate::kDeviceLost;
      case MechanismLifecycle::kTerminated: return Gate::kTerminated;
    }
    return Gate::kPoisoned;
  }
  // Each settles one queued release; `slot` is where its record was taken from.
  void settle_released(RecordSlot slot) noexcept {
    RecordShard& shard = records_.shard(slot.shard);
    const LockGuard lock(shard.guard);
    shard.queued.lower();
  }
  void settle_quarantined(RecordSlot slot, const QuarantinedAllocation& record) noexcept;

  void retire();
  void invalidate(const std::shared_ptr<const std::string>& reason);
  // Not-quiescent or not-lost refusals for confirm_context_terminated.
  [[nodiscard]] Expected<void, BindingError> check_terminable(ProviderContextIdentity context);
  void terminate();
  [[nodiscard]] MechanismLifecycle lifecycle();

  // Reads without a lock, in time independent of how many allocations are
  // live or quarantined; never shows a request under way as absent.
  [[nodiscard]] MechanismSnapshot snapshot() const;
  // A snapshot whose zero counts, read after a lifecycle that admits no new
  // operation, stay zero: what removal decides on. Takes every shard lock.
  [[nodiscard]] MechanismSnapshot quiescence_snapshot();
  [[nodiscard]] std::vector<QuarantinedAllocation> quarantined();

 private:
  struct LetGo;
  // The recording step of a Recording, under the shard's lock. Generations
  // come from the shard's own block of serials, so the registry's shared
  // counter is touched once per block, not per allocation.
  [[nodiscard, gnu::always_inline]] Recorded record_locked(RecordShard& shard, const AllocationRecord& record,
                                                           ActiveOperation& operation, AllocationGeneration& generation,
                                                           std::uint32_t& index) noexcept ORTMEM_REQUIRES(shard.guard) {
    if (!shard.generations.take(generation) && !refill_generations(shard, generation)) {
      return Recorded::kNoGeneration;
    }
    index = shard.insert(generation.opaque().serial(), record);
    if (index == RecordShard::kNoSlot) return Recorded::kNoMemory;
    operation.finish_holding(shard.guard);
    return Recorded::kLive;
  }
  // Refills the shard's block of generations and takes one from it; false
  // when the registry's issuer has no more to give.
  [[nodiscard, gnu::cold]] bool refill_generations(RecordShard& shard, AllocationGeneration& generation)
      ORTMEM_REQUIRES(shard.guard);
  [[nodiscard]] static bool matches(const AllocationRecord& record, const AllocationRecord& expected) noexcept {
    return record.binding == expected.binding && record.address == expected.address && record.bytes == expected.bytes &&
           record.align == expected.align;
  }
  // Drops every shard's anchor once nothing but handles holds the mechanism,
  // so that the last handle to go destroys it.
  void release_anchors() noexcept;
  void record_quarantine(const QuarantinedAllocation& record) noexcept;
  // The shards' counts.
  struct ShardTotals {
    std::size_t live = 0;
    std::size_t queued = 0;
    std::size_t active = 0;
    // What keeps the mechanism from quiescence: open operations, and
    // prepared releases that have not settled.
    [[nodiscard]] std::size_t active_operations() const noexcept { return active + queued; }
  };
  // Each shard read under its lock: misses no operation that a lifecycle
  // read before it let in (what a confirmation needs).
  [[nodiscard]] ShardTotals shard_totals();
  // Read without locks: counts each request under way in one of its counts.
  [[nodiscard]] ShardTotals published_totals() const;
  [[nodiscard]] MechanismSnapshot snapshot_of(MechanismLifecycle lifecycle, const ShardTotals& totals) const;
  // Moves the lifecycle to `to` unless it is one `from` excludes. A
  // compare-and-swap, not a load then a store: a retire takes no lock, and
  // must not overwrite an invalidation or a termination that lands between
  // its read and its write.
  template <class Allowed>
  void transition(Allowed from, MechanismLifecycle to) noexcept {
    MechanismLifecycle now = lifecycle_.load(std::memory_order_relaxed);
    while (from(now) &&
           !lifecycle_.compare_exchange_weak(now, to, std::memory_order_release, std::memory_order_relaxed)) {
    }
  }

  const MechanismIdentity identity_;
  const DeviceKey device_;
  const MechanismCoherence coherence_;
  // The registry's issuer, which the shards reserve allocation generations
  // from; kept alive here because a mechanism can outlive its registry.
  const std::shared_ptr<IdentityIssuer> identities_;

  // Read by every operation, written only by the rare transitions.
  std::atomic<MechanismLifecycle> lifecycle_{MechanismLifecycle::kActive};
  // Set when bookkeeping could not be completed (out of memory while
  // recording): from then on releases settle as state-poisoned. Sticky, so
  // it is read without the lock.
  std::atomic<bool> poisoned_{false};
  RecordTable records_;

  Mutex mutex_;
  // Set before the lifecycle turns device-lost, under this lock.
  std::shared_ptr<const std::string> loss_reason_ ORTMEM_GUARDED_BY(mutex_);
  std::unordered_map<std::uint64_t, QuarantinedAllocation> quarantined_ ORTMEM_GUARDED_BY(mutex_);
  // Kept beside the map so a snapshot is O(1) and stays right even if
  // recording a quarantine entry ran out of memory. Written only under
  // mutex_; a snapshot reads them without it.
  std::atomic<std::size_t> quarantined_count_{0};
  std::atomic<std::uint64_t> quarantined_bytes_{0};

  // Last, so the allocator goes before the records (see Resources).
  Resources resources_;
};

}  // namespace ortmem::detail
