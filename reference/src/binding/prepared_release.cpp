#include "ortmem/deferred.hpp"

#include "mechanism.hpp"
#include "release_settlement.hpp"

namespace ortmem {

PreparedAllocationRelease::PreparedAllocationRelease(detail::BindingKey, std::shared_ptr<detail::Mechanism> mechanism,
                                                     const detail::AllocationName& name, detail::RecordSlot slot,
                                                     void* ptr, std::size_t bytes, std::size_t align) noexcept
    : mechanism_(std::move(mechanism)), name_(name), slot_(slot), ptr_(ptr), bytes_(bytes), align_(align),
      armed_(true) {}

AllocationIdentity PreparedAllocationRelease::identity() const noexcept {
  return detail::Mechanism::allocation_identity(mechanism_, name_);
}

// Each read alone, not through identity(): a queue checks the context of
// every request it takes, and building the whole identity for it would cost
// more than the check.
BindingIdentity PreparedAllocationRelease::binding_identity() const noexcept {
  return mechanism_ ? mechanism_->binding_identity(name_.binding(), name_.binding_generation()) : BindingIdentity{};
}

DeviceKey PreparedAllocationRelease::device() const noexcept { return mechanism_ ? mechanism_->device() : DeviceKey{}; }

AuthorityIdentity PreparedAllocationRelease::authority() const noexcept {
  return mechanism_ ? mechanism_->authority() : AuthorityIdentity{};
}

ProviderContextIdentity PreparedAllocationRelease::provider_context() const noexcept {
  return mechanism_ ? mechanism_->context() : ProviderContextIdentity{};
}

AllocationReleaseState PreparedAllocationRelease::state() const noexcept { return AllocationReleaseState::kQueued; }

PreparedAllocationRelease& PreparedAllocationRelease::operator=(PreparedAllocationRelease&& other) noexcept {
  if (this != &other) {
    abandon();
    mechanism_ = std::move(other.mechanism_);
    name_ = other.name_;
    slot_ = other.slot_;
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    align_ = other.align_;
    armed_ = std::exchange(other.armed_, false);
  }
  return *this;
}

void PreparedAllocationRelease::abandon() noexcept {
  if (is_armed()) {
    (void)settle_quarantined(ReleaseAccounting::eager(bytes_), AllocationReleaseState::kQuarantined,
                             QuarantineReason::of(QuarantineReason::Kind::kAbandonedRequest), bytes_);
  }
}

detail::TakenRelease PreparedAllocationRelease::taken() const noexcept {
  return {*mechanism_, name_, slot_, ptr_, bytes_, align_};
}

AllocationReleaseOutcome PreparedAllocationRelease::settle_quarantined(ReleaseAccounting accounting,
                                                                       AllocationReleaseState state,
                                                                       QuarantineReason reason,
                                                                       std::uint64_t retained_bytes) noexcept {
  disarm();
  return detail::settle_quarantined(taken(), accounting, state, reason, retained_bytes);
}

void PreparedAllocationRelease::disarm() noexcept { armed_ = false; }

AllocationReleaseOutcome PreparedAllocationRelease::execute() && noexcept {
  disarm();
  return detail::execute_release(taken());
}

AllocationReleaseOutcome PreparedAllocationRelease::settle(AllocationReleaseOutcome performed) && noexcept {
  disarm();
  detail::settle_outcome(taken(), performed);
  return performed;
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
