#include "mechanism.hpp"

namespace ortmem::detail {

Mechanism::Mechanism(MechanismIdentity identity, DeviceKey device, MechanismCoherence coherence,
                     Resources resources, std::shared_ptr<IdentityIssuer> identities)
    : identity_(identity), device_(device), coherence_(coherence), identities_(std::move(identities)),
      resources_(std::move(resources)) {}

BindingError Mechanism::inactive_error(std::string_view operation) const {
  if (lifecycle_ == MechanismLifecycle::kDeviceLost) return BindingError::device_lost(device_, loss_reason_);
  return BindingError::inactive_mechanism(identity_, lifecycle_, operation);
}

ActiveOperation Mechanism::open_operation() noexcept {
  active_operations_.fetch_add(1, std::memory_order_acq_rel);
  return ActiveOperation(active_operations_);
}

Expected<ActiveOperation, BindingError> Mechanism::begin_active(std::string_view operation) {
  const std::lock_guard lock(mutex_);
  if (lifecycle_ != MechanismLifecycle::kActive) return fail(inactive_error(operation));
  // Counted under the lock, so a confirmation that saw the mechanism lost also
  // sees every operation that started while it was active.
  return open_operation();
}

Expected<void, BindingError> Mechanism::record(AllocationGeneration generation, const AllocationRecord& record) {
  const std::lock_guard lock(mutex_);
  try {
    live_.emplace(generation.opaque().serial(), record);
  } catch (const std::bad_alloc&) {
    return fail(BindingError::memory(MemoryError::allocation_failed(
        device_.tier, record.bytes, "the registry ran out of host memory recording the allocation")));
  }
  return {};
}

void Mechanism::forget(AllocationGeneration generation) noexcept {
  const std::lock_guard lock(mutex_);
  live_.erase(generation.opaque().serial());
}

namespace {

bool matches(const AllocationRecord& record, const AllocationRecord& expected) {
  return record.binding == expected.binding && record.address == expected.address &&
         record.bytes == expected.bytes && record.align == expected.align;
}

}  // namespace

Expected<void, BindingError> Mechanism::validate(const BindingIdentity& through, const AllocationIdentity& identity,
                                                 const AllocationRecord& expected, std::string_view operation) {
  // Another registry's allocation is foreign, not merely another binding's:
  // its ids may even collide with ours (BIND-001).
  if (identity.binding.id.issuer() != through.id.issuer()) return fail(BindingError::foreign_registry("allocation"));
  if (identity.binding.id != through.id) return fail(BindingError::binding_mismatch(through.id, identity.binding.id));
  const std::lock_guard lock(mutex_);
  if (lifecycle_ != MechanismLifecycle::kActive) return fail(inactive_error(operation));
  const auto found = live_.find(identity.generation.opaque().serial());
  if (found == live_.end() || !matches(found->second, expected)) return fail(BindingError::stale_allocation(identity));
  return {};
}

Expected<ActiveOperation, BindingError> Mechanism::take_for_release(const BindingIdentity& through,
                                                                    const AllocationIdentity& identity,
                                                                    const AllocationRecord& expected) {
  // As in validate(): a handle of another registry is refused as foreign (BIND-001).
  if (identity.binding.id.issuer() != through.id.issuer()) return fail(BindingError::foreign_registry("allocation"));
  if (identity.binding.id != through.id) return fail(BindingError::binding_mismatch(through.id, identity.binding.id));
  const std::lock_guard lock(mutex_);
  if (lifecycle_ != MechanismLifecycle::kActive && lifecycle_ != MechanismLifecycle::kRetired) {
    return fail(inactive_error("preparing a release"));
  }
  const auto found = live_.find(identity.generation.opaque().serial());
  if (found == live_.end() || !matches(found->second, expected)) return fail(BindingError::stale_allocation(identity));
  // Removing the record under this lock is what makes release exactly-once:
  // a second racer finds nothing and is told its metadata is stale.
  live_.erase(found);
  ++queued_;
  return open_operation();
}

Mechanism::Gate Mechanism::release_gate() {
  const std::lock_guard lock(mutex_);
  if (poisoned_) return Gate::kPoisoned;
  switch (lifecycle_) {
    case MechanismLifecycle::kActive:
    case MechanismLifecycle::kRetired: return Gate::kAllowed;
    case MechanismLifecycle::kDeviceLost: return Gate::kDeviceLost;
    case MechanismLifecycle::kTerminated: return Gate::kTerminated;
  }
  return Gate::kPoisoned;
}

void Mechanism::settle_released() noexcept {
  const std::lock_guard lock(mutex_);
  --queued_;
}

void Mechanism::settle_quarantined(const QuarantinedAllocation& record) noexcept {
  const std::lock_guard lock(mutex_);
  --queued_;
  if (lifecycle_ == MechanismLifecycle::kTerminated) return;  // termination already discharged it
  ++quarantined_count_;
  quarantined_bytes_ += record.retained_bytes;
  try {
    quarantined_.emplace(record.identity.generation.opaque().serial(), record);
  } catch (const std::bad_alloc&) {
    // The counts above still say ownership is retained; the list cannot.
    poisoned_ = true;
  }
}

void Mechanism::retire() {
  const std::lock_guard lock(mutex_);
  if (lifecycle_ == MechanismLifecycle::kActive) lifecycle_ = MechanismLifecycle::kRetired;
}

void Mechanism::invalidate(const std::shared_ptr<const std::string>& reason) {
  const std::lock_guard lock(mutex_);
  if (lifecycle_ == MechanismLifecycle::kTerminated || lifecycle_ == MechanismLifecycle::kDeviceLost) return;
  lifecycle_ = MechanismLifecycle::kDeviceLost;
  loss_reason_ = reason;
}

Expected<void, BindingError> Mechanism::check_terminable(ProviderContextIdentity context) {
  const std::lock_guard lock(mutex_);
  if (lifecycle_ == MechanismLifecycle::kTerminated) return {};
  if (lifecycle_ != MechanismLifecycle::kDeviceLost) {
    return fail(BindingError::inactive_mechanism(identity_, lifecycle_,
                                                 "confirming termination before the device was invalidated"));
  }
  const std::size_t active = active_operations_.load(std::memory_order_acquire);
  if (active != 0) return fail(BindingError::context_not_quiescent(context, active));
  return {};
}

void Mechanism::terminate() {
  const std::lock_guard lock(mutex_);
  lifecycle_ = MechanismLifecycle::kTerminated;
  // The context is gone, and with it every byte these records describe.
  live_.clear();
  quarantined_.clear();
  quarantined_count_ = 0;
  quarantined_bytes_ = 0;
}

MechanismLifecycle Mechanism::lifecycle() {
  const std::lock_guard lock(mutex_);
  return lifecycle_;
}

MechanismSnapshot Mechanism::snapshot() {
  const std::lock_guard lock(mutex_);
  return MechanismSnapshot{
      .identity = identity_,
      .device = device_,
      .provider_context = context(),
      .authority = authority(),
      .coherence = coherence_,
      .lifecycle = lifecycle_,
      .live_allocations = live_.size(),
      .active_operations = active_operations_.load(std::memory_order_acquire),
      .queued_releases = queued_,
      .quarantined_allocations = quarantined_count_,
      .quarantined_bytes = quarantined_bytes_,
  };
}

std::vector<QuarantinedAllocation> Mechanism::quarantined() {
  const std::lock_guard lock(mutex_);
  std::vector<QuarantinedAllocation> records;
  records.reserve(quarantined_.size());
  for (const auto& [serial, record] : quarantined_) records.push_back(record);
  return records;
}

}  // namespace ortmem::detail
