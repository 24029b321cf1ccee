#include "mechanism.hpp"
#include "ortmem/deferred.hpp"

namespace ortmem {

PreparedAllocationRelease::PreparedAllocationRelease(MemoryBinding binding, AllocationIdentity identity,
                                                     detail::RecordSlot slot, void* ptr, std::size_t bytes,
                                                     std::size_t align, detail::ActiveOperation operation) noexcept
    : binding_(std::move(binding)), identity_(identity), slot_(slot), ptr_(ptr), bytes_(bytes), align_(align),
      operation_(std::move(operation)) {}

PreparedAllocationRelease::PreparedAllocationRelease(PreparedAllocationRelease&& other) noexcept
    : binding_(std::move(other.binding_)), identity_(other.identity_), slot_(other.slot_), ptr_(other.ptr_),
      bytes_(other.bytes_), align_(other.align_), operation_(std::move(other.operation_)) {
  other.operation_.reset();
}

PreparedAllocationRelease& PreparedAllocationRelease::operator=(PreparedAllocationRelease&& other) noexcept {
  if (this != &other) {
    if (is_armed()) (void)settle_quarantined(ReleaseAccounting::eager(bytes_), AllocationReleaseState::kQuarantined,
                                             QuarantineReason::of(QuarantineReason::Kind::kAbandonedRequest), bytes_);
    binding_ = std::move(other.binding_);
    identity_ = other.identity_;
    slot_ = other.slot_;
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    align_ = other.align_;
    operation_ = std::move(other.operation_);
    other.operation_.reset();
  }
  return *this;
}

PreparedAllocationRelease::~PreparedAllocationRelease() {
  // Abandoned: record the ownership as retained. Never free, call the
  // allocator or wait here: nobody knows whether the device still uses it.
  if (is_armed()) {
    (void)settle_quarantined(ReleaseAccounting::eager(bytes_), AllocationReleaseState::kQuarantined,
                             QuarantineReason::of(QuarantineReason::Kind::kAbandonedRequest), bytes_);
  }
}

AllocationReleaseOutcome PreparedAllocationRelease::settle_quarantined(ReleaseAccounting accounting,
                                                                       AllocationReleaseState state,
                                                                       QuarantineReason reason,
                                                                       std::uint64_t retained_bytes) noexcept {
  const ResidualOwnership residual{state, reason, retained_bytes, reinterpret_cast<std::uintptr_t>(ptr_), align_};
  binding_.mechanism_->settle_quarantined(slot_, QuarantinedAllocation{identity_, residual.address, bytes_, align_, state,
                                                                reason, retained_bytes});
  disarm();
  return AllocationReleaseOutcome::quarantined(accounting, residual);
}

void PreparedAllocationRelease::disarm() noexcept { operation_.reset(); }

AllocationReleaseOutcome PreparedAllocationRelease::execute() && noexcept {
  using Gate = detail::Mechanism::Gate;
  using Kind = QuarantineReason::Kind;
  const ReleaseAccounting nothing_unmapped = ReleaseAccounting::eager(bytes_);
  switch (binding_.mechanism_->release_gate()) {
    case Gate::kAllowed: break;
    case Gate::kDeviceLost:
      return settle_quarantined(nothing_unmapped, AllocationReleaseState::kDeviceLost,
                                QuarantineReason::of(Kind::kDeviceLost), bytes_);
    case Gate::kTerminated:
      return settle_quarantined(nothing_unmapped, AllocationReleaseState::kQuarantined,
                                QuarantineReason::of(Kind::kMechanismTerminated), bytes_);
    case Gate::kPoisoned:
      return settle_quarantined(nothing_unmapped, AllocationReleaseState::kQuarantined,
                                QuarantineReason::of(Kind::kStatePoisoned), bytes_);
  }
  // No lock is held: the allocator may take its own locks or re-enter the registry.
  AllocationReleaseOutcome outcome = binding_.mechanism_->allocator().release(ptr_, bytes_, align_);
  switch (outcome.kind()) {
    case AllocationReleaseOutcome::Kind::kComplete:
      binding_.mechanism_->settle_released(slot_);
      disarm();
      return outcome;
    case AllocationReleaseOutcome::Kind::kQuarantined: {
      const ResidualOwnership residual = *outcome.residual();
      return settle_quarantined(*outcome.accounting(), residual.state, residual.reason, residual.retained_bytes);
    }
    case AllocationReleaseOutcome::Kind::kFailed:
      // "Nothing changed" is no longer true: the live record is gone.
      return settle_quarantined(nothing_unmapped, AllocationReleaseState::kQuarantined,
                                QuarantineReason::of(Kind::kAllocatorRefused), bytes_);
  }
  return outcome;
}

AllocationReleaseOutcome PreparedAllocationRelease::quarantine_device_lost() && noexcept {
  return settle_quarantined(ReleaseAccounting::eager(bytes_), AllocationReleaseState::kDeviceLost,
                            QuarantineReason::of(QuarantineReason::Kind::kDeviceLost), bytes_);
}

AllocationReleaseOutcome PreparedAllocationRelease::quarantine(QuarantineReason reason) && noexcept {
  return settle_quarantined(ReleaseAccounting::eager(bytes_), AllocationReleaseState::kQuarantined, reason, bytes_);
}

std::string DeferredEnqueueError::message() const {
  return "the deferred release queue refused " + to_string(request_.identity()) + " (" +
         std::string(rejection_name(rejection_)) +
         "); take the request back and release it another way, or it is quarantined when this error is destroyed";
}

}  // namespace ortmem
