#include "mechanism.hpp"

namespace ortmem::detail {

Mechanism::Mechanism(MechanismIdentity identity, DeviceKey device, MechanismCoherence coherence, Resources resources,
                     std::shared_ptr<IdentityIssuer> identities)
    : identity_(identity), device_(device), coherence_(coherence), identities_(std::move(identities)),
      resources_(std::move(resources)) {}

// The deleter of the pointer make() returns: it holds the mechanism's own
// reference until everything outside the handles has let go.
struct Mechanism::LetGo {
  std::shared_ptr<Mechanism> mechanism;
  void operator()(Mechanism* /*same as mechanism*/) noexcept {
    mechanism->release_anchors();
    mechanism.reset();
  }
};

std::shared_ptr<Mechanism> Mechanism::make(MechanismIdentity identity, DeviceKey device, MechanismCoherence coherence,
                                           Resources resources, std::shared_ptr<IdentityIssuer> identities) {
  auto mechanism =
      std::make_shared<Mechanism>(identity, device, coherence, std::move(resources), std::move(identities));
  // Made here, not on first use, so that recording never allocates under a
  // shard lock. Each on a cache line of its own: threads on neighbouring
  // shards would otherwise write one line through two anchors' counts.
  struct alignas(64) Anchor {
    std::shared_ptr<Mechanism> mechanism;
  };
  for (RecordShard& shard : mechanism->records_.shards()) {
    auto anchor = std::make_shared<Anchor>(Anchor{mechanism});
    const LockGuard lock(shard.guard);
    shard.handle_anchor = std::move(anchor);
  }
  Mechanism* const raw = mechanism.get();
  return std::shared_ptr<Mechanism>(raw, LetGo{std::move(mechanism)});
}

void Mechanism::release_anchors() noexcept {
  for (RecordShard& shard : records_.shards()) {
    std::shared_ptr<const void> anchor;
    {
      const LockGuard lock(shard.guard);
      anchor = std::move(shard.handle_anchor);
    }
    // Dropped unlocked: the LetGo deleter still holds the mechanism, so this
    // cannot destroy it (and its locks) mid-loop.
  }
}

BindingError Mechanism::inactive_error(MechanismLifecycle lifecycle, std::string_view operation) {
  if (lifecycle == MechanismLifecycle::kDeviceLost) {
    // The reason was stored under this lock before the lifecycle turned device-lost.
    const LockGuard lock(mutex_);
    return BindingError::device_lost(device_, loss_reason_);
  }
  return BindingError::inactive_mechanism(identity_, lifecycle, operation);
}

Expected<ActiveOperation, BindingError> Mechanism::begin_active(std::string_view operation) {
  const Opened opened = open_operation();
  // Built with no shard lock held (a device-lost error takes the mechanism lock).
  if (opened.shard == nullptr) return fail(inactive_error(opened.lifecycle, operation));
  return ActiveOperation(opened.shard->guard, opened.shard->active);
}

bool Mechanism::refill_generations(RecordShard& shard, AllocationGeneration& generation) {
  auto block = identities_->reserve(RecordShard::kGenerationBlock);
  if (!block) return false;
  shard.generations = *block;
  return shard.generations.take(generation);
}

BindingError Mechanism::record_error(Recorded refusal, std::size_t bytes) const {
  if (refusal == Recorded::kNoGeneration) return BindingError::identity_exhausted();
  return BindingError::memory(MemoryError::allocation_failed(
      device_.tier, bytes, "the registry ran out of host memory recording the allocation"));
}

CheckResult Mechanism::validate(BindingId through, const AllocationName& name, RecordSlot slot,
                                const AllocationRecord& expected, std::string_view operation) {
  // Another registry's allocation is foreign, not merely another binding's:
  // its ids may even collide with ours (BIND-001).
  if (name.binding().issuer() != through.issuer()) return fail(BindingError::foreign_registry("allocation"));
  if (name.binding() != through) return fail(BindingError::binding_mismatch(through, name.binding()));
  RecordShard& shard = records_.shard(slot.shard);
  MechanismLifecycle lifecycle{};
  bool live = false;
  {
    // The lifecycle is read under the shard lock: termination turns it
    // before it clears each shard under its lock, so a record found here was
    // live while the lifecycle read here held.
    const LockGuard lock(shard.guard);
    lifecycle = lifecycle_.load(std::memory_order_acquire);
    if (lifecycle == MechanismLifecycle::kActive) {
      const AllocationRecord* found = shard.find(slot.index, name.generation_serial());
      live = found != nullptr && matches(*found, expected);
    }
  }
  // Errors are built with no shard lock held (a device-lost error takes the mechanism lock).
  if (lifecycle != MechanismLifecycle::kActive) return fail(inactive_error(lifecycle, operation));
  if (!live) return fail(BindingError::stale_allocation(allocation_identity(name)));
  return CheckPassed{};
}

BindingError Mechanism::take_error(Taken refusal, MechanismLifecycle lifecycle, const AllocationName& name) {
  if (refusal == Taken::kStale) return BindingError::stale_allocation(allocation_identity(name));
  return inactive_error(lifecycle, "preparing a release");
}

CheckResult Mechanism::take_for_release(BindingId through, const AllocationName& name, RecordSlot slot,
                                        const AllocationRecord& expected) {
  // As in validate(): a handle of another registry is refused as foreign (BIND-001).
  if (name.binding().issuer() != through.issuer()) return fail(BindingError::foreign_registry("allocation"));
  if (name.binding() != through) return fail(BindingError::binding_mismatch(through, name.binding()));
  MechanismLifecycle lifecycle{};
  const Taken taken = take_record(name, slot, expected, lifecycle);
  // Built with no shard lock held (a device-lost error takes the mechanism lock).
  if (taken != Taken::kTaken) return fail(take_error(taken, lifecycle, name));
  return CheckPassed{};
}

Mechanism::ShardTotals Mechanism::shard_totals() {
  ShardTotals totals;
  for (RecordShard& shard : records_.shards()) {
    const LockGuard shard_lock(shard.guard);
    totals.live += shard.live().read();
    totals.queued += shard.queued.read();
    totals.active += shard.active.read();
  }
  return totals;
}

Mechanism::ShardTotals Mechanism::published_totals() const {
  ShardTotals totals;
  // Only shards in use: a request starts in its opening thread's shard,
  // marked in use first, and never moves to another.
  records_.for_each_in_use([&](const RecordShard& shard) {
    // In the order a request moves through them (opened, recorded live,
    // queued for release): each step raises the next count before it lowers
    // this one, so a request that left a count read here is found in a
    // count read after it.
    totals.active += shard.active.read();
    totals.live += shard.live().read();
    totals.queued += shard.queued.read();
  });
  return totals;
}

void Mechanism::settle_quarantined(RecordSlot slot, const QuarantinedAllocation& record) noexcept {
  // Recorded before the request stops counting as queued (and active), so
  // nobody sees the mechanism quiescent in between.
  record_quarantine(record);
  settle_released(slot);
}

void Mechanism::record_quarantine(const QuarantinedAllocation& record) noexcept {
  const LockGuard lock(mutex_);
  // Termination already discharged it.
  if (lifecycle_.load(std::memory_order_relaxed) == MechanismLifecycle::kTerminated) return;
  // Published before the settlement lowers the queued count, which a
  // snapshot reads first (see published_totals).
  quarantined_count_.store(quarantined_count_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  quarantined_bytes_.store(quarantined_bytes_.load(std::memory_order_relaxed) + record.retained_bytes,
                           std::memory_order_release);
  try {
    quarantined_.emplace(record.identity.generation.opaque().serial(), record);
  } catch (const std::bad_alloc&) {
    // The counts above still say ownership is retained; the list cannot.
    poisoned_.store(true, std::memory_order_release);
  }
}

void Mechanism::retire() {
  // Only the lifecycle changes, by compare-and-swap (transition), so no lock:
  // an invalidation or termination racing it wins or follows, never vanishes.
  transition([](MechanismLifecycle from) { return from == MechanismLifecycle::kActive; }, MechanismLifecycle::kRetired);
}

void Mechanism::invalidate(const std::shared_ptr<const std::string>& reason) {
  const LockGuard lock(mutex_);
  const MechanismLifecycle lifecycle = lifecycle_.load(std::memory_order_relaxed);
  if (lifecycle == MechanismLifecycle::kTerminated || lifecycle == MechanismLifecycle::kDeviceLost) return;
  // The reason first: whoever sees device-lost reads it under this lock.
  loss_reason_ = reason;
  transition(
      [](MechanismLifecycle from) {
        return from == MechanismLifecycle::kActive || from == MechanismLifecycle::kRetired;
      },
      MechanismLifecycle::kDeviceLost);
}

Expected<void, BindingError> Mechanism::check_terminable(ProviderContextIdentity context) {
  const MechanismLifecycle lifecycle = lifecycle_.load(std::memory_order_acquire);
  if (lifecycle == MechanismLifecycle::kTerminated) return {};
  if (lifecycle != MechanismLifecycle::kDeviceLost) {
    return fail(BindingError::inactive_mechanism(identity_, lifecycle,
                                                 "confirming termination before the device was invalidated"));
  }
  // The lifecycle was read first, so the shards read now miss nothing that
  // was let in (mechanism.hpp). Device-lost refuses new operations and new
  // prepared releases, so once both read zero they stay zero.
  const std::size_t active = shard_totals().active_operations();
  if (active != 0) return fail(BindingError::context_not_quiescent(context, active));
  return {};
}

void Mechanism::terminate() {
  const LockGuard lock(mutex_);
  transition([](MechanismLifecycle) { return true; }, MechanismLifecycle::kTerminated);
  // The context is gone, and with it every byte these records describe. The
  // lifecycle turned first, so a shard reader that finds a record still saw it live.
  for (RecordShard& shard : records_.shards()) {
    const LockGuard shard_lock(shard.guard);
    shard.clear();
  }
  quarantined_.clear();
  quarantined_count_.store(0, std::memory_order_release);
  quarantined_bytes_.store(0, std::memory_order_release);
}

MechanismLifecycle Mechanism::lifecycle() { return lifecycle_.load(std::memory_order_acquire); }

MechanismSnapshot Mechanism::snapshot() const {
  // No lock: a snapshot of a quiet mechanism writes nothing a working thread
  // reads. The lifecycle is read before the shards, as a confirmation reads
  // them, and the quarantine after them, since a settling request joins it
  // before it leaves the queued count.
  const MechanismLifecycle lifecycle = lifecycle_.load(std::memory_order_acquire);
  return snapshot_of(lifecycle, published_totals());
}

MechanismSnapshot Mechanism::quiescence_snapshot() {
  // As a confirmation reads: an operation let in before the lifecycle read
  // here is still being admitted under its shard lock, not yet counted where
  // an unlocked read would look.
  const MechanismLifecycle lifecycle = lifecycle_.load(std::memory_order_acquire);
  return snapshot_of(lifecycle, shard_totals());
}

MechanismSnapshot Mechanism::snapshot_of(MechanismLifecycle lifecycle, const ShardTotals& totals) const {
  return MechanismSnapshot{
      .identity = identity_,
      .device = device_,
      .provider_context = context(),
      .authority = authority(),
      .coherence = coherence_,
      .lifecycle = lifecycle,
      .live_allocations = totals.live,
      .active_operations = totals.active_operations(),
      .queued_releases = totals.queued,
      .quarantined_allocations = quarantined_count_.load(std::memory_order_acquire),
      .quarantined_bytes = quarantined_bytes_.load(std::memory_order_acquire),
  };
}

std::vector<QuarantinedAllocation> Mechanism::quarantined() {
  const LockGuard lock(mutex_);
  std::vector<QuarantinedAllocation> records;
  records.reserve(quarantined_.size());
  for (const auto& [serial, record] : quarantined_) records.push_back(record);
  return records;
}

}  // namespace ortmem::detail
