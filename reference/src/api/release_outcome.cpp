#include "ortmem/release_outcome.hpp"

namespace ortmem {

std::string_view state_name(AllocationReleaseState state) noexcept {
  switch (state) {
    case AllocationReleaseState::kLive: return "live";
    case AllocationReleaseState::kQueued: return "queued";
    case AllocationReleaseState::kPartiallyUnmapped: return "partially-unmapped";
    case AllocationReleaseState::kReleased: return "released";
    case AllocationReleaseState::kDeviceLost: return "device-lost";
    case AllocationReleaseState::kQuarantined: return "quarantined";
  }
  return "unknown";
}

std::string_view rejection_name(DeferredEnqueueRejection rejection) noexcept {
  switch (rejection) {
    case DeferredEnqueueRejection::kClosed: return "closed";
    case DeferredEnqueueRejection::kFull: return "full";
    case DeferredEnqueueRejection::kDeviceLost: return "device-lost";
    case DeferredEnqueueRejection::kRefused: return "refused";
  }
  return "unknown";
}

std::string reason_name(QuarantineReason reason) {
  using Kind = QuarantineReason::Kind;
  switch (reason.kind) {
    case Kind::kAbandonedRequest: return "abandoned-request";
    case Kind::kOwnerDropped: return "owner-dropped";
    case Kind::kEnqueueRejected: return "enqueue-rejected(" + std::string(rejection_name(reason.rejection)) + ")";
    case Kind::kDeviceLost: return "device-lost";
    case Kind::kMechanismTerminated: return "mechanism-terminated";
    case Kind::kPartialRelease: return "partial-release";
    case Kind::kAllocatorRefused: return "allocator-refused";
    case Kind::kStatePoisoned: return "state-poisoned";
  }
  return "unknown";
}

std::string describe(QuarantineReason reason) {
  using Kind = QuarantineReason::Kind;
  switch (reason.kind) {
    case Kind::kAbandonedRequest: return "a prepared release request was destroyed without being executed";
    case Kind::kOwnerDropped: return "an owning allocation was destroyed without a release";
    case Kind::kEnqueueRejected:
      return "the deferred release queue refused the request (" + std::string(rejection_name(reason.rejection)) + ")";
    case Kind::kDeviceLost: return "the device or provider context was lost, so the allocator must not be called";
    case Kind::kMechanismTerminated: return "the mechanism was already terminated";
    case Kind::kPartialRelease: return "the allocator released only part of the allocation";
    case Kind::kAllocatorRefused: return "the allocator refused after the live record was retired";
    case Kind::kStatePoisoned: return "mechanism state could not be settled safely";
  }
  return "unknown quarantine reason";
}

AllocationReleaseState AllocationReleaseOutcome::state() const noexcept {
  switch (kind_) {
    case Kind::kComplete: return AllocationReleaseState::kReleased;
    case Kind::kQuarantined: return residual_.state;
    case Kind::kFailed: return AllocationReleaseState::kLive;
  }
  return AllocationReleaseState::kQuarantined;
}

std::string AllocationReleaseOutcome::describe() const {
  switch (kind_) {
    case Kind::kComplete:
      return "complete: released " + std::to_string(accounting_.allocation_bytes) + " bytes, " +
             std::to_string(accounting_.unmapped_bytes) + " unmapped";
    case Kind::kQuarantined:
      return "quarantined (" + std::string(state_name(residual_.state)) + "): " + ortmem::describe(residual_.reason) +
             "; " + std::to_string(residual_.retained_bytes) + " bytes retained, " +
             std::to_string(accounting_.unmapped_bytes) + " unmapped";
    case Kind::kFailed: return "failed with nothing changed: " + failure_.reason();
  }
  return "unknown outcome";
}

bool operator==(const AllocationReleaseOutcome& a, const AllocationReleaseOutcome& b) {
  if (a.kind_ != b.kind_) return false;
  switch (a.kind_) {
    case AllocationReleaseOutcome::Kind::kComplete: return a.accounting_ == b.accounting_;
    case AllocationReleaseOutcome::Kind::kQuarantined:
      return a.accounting_ == b.accounting_ && a.residual_ == b.residual_;
    case AllocationReleaseOutcome::Kind::kFailed: return a.failure_ == b.failure_;
  }
  return false;
}

}  // namespace ortmem
