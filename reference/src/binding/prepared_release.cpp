#include "mechanism.hpp"
#include "ortmem/deferred.hpp"

namespace ortmem {

PreparedAllocationRelease::PreparedAllocationRelease(std::shared_ptr<detail::Mechanism> mechanism,
                                                     AllocationIdentity identity,
                                                     detail::RecordSlot slot, void* ptr, std::size_t bytes,
                                                     std::size_t align) noexcept
    : mechanism_(std::move(mechanism)), identity_(identity), slot_(slot), ptr_(ptr), bytes_(bytes), align_(align),
      armed_(true) {}

PreparedAllocationRelease::PreparedAllocationRelease(PreparedAllocationRelease&& other) noexcept
    : mechanism_(std::move(other.mechanism_)), identity_(other.identity_), slot_(other.slot_), ptr_(other.ptr_),
      bytes_(other.bytes_), align_(other.align_), armed_(std::exchange(other.armed_, false)) {
}

PreparedAllocationRelease& PreparedAllocationRelease::operator=(PreparedAllocationRelease&& other) noexcept {
  if (this != &other) {
    if (is_armed()) (void)settle_quarantined(ReleaseAccounting::eager(bytes_), AllocationReleaseState::kQuarantined,
                                             QuarantineReason::of(QuarantineReason::Kind::kAbandonedRequest), bytes_);
    mechanism_ = std::move(other.mechanism_);
    identity_ = other.identity_;
    slot_ = other.slot_;
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    align_ = other.align_;
    armed_ = std::exchange(other.armed_, false);
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
  mechanism_->settle_quarantined(slot_, QuarantinedAllocation{identity_, residual.address, bytes_, align_, state,
                                                                reason, retained_bytes});
  disarm();
  return AllocationReleaseOutcome::quarantined(accounting, residual);
}

void PreparedAllocationRelease::disarm() noexcept { armed_ = false; }

AllocationReleaseOutcome PreparedAllocationRelease::execute() && noexcept {
  using Gate = detail::Mechanism::Gate;
  using Kind = QuarantineReason::Kind;
  const ReleaseAccounting nothing_unmapped = ReleaseAccounting::eager(bytes_);
  switch (mechanism_->release_gate()) {
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
  AllocationReleaseOutcome outcome = mechanism_->allocator().release(ptr_, bytes_, align_);
  switch (outcome.kind()) {
    case AllocationReleaseOutcome::Kind::kComplete:
      mechanism_->settle_released(slot_);
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
