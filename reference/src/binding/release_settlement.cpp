#include "release_settlement.hpp"

#include "mechanism.hpp"

namespace ortmem::detail {

AllocationReleaseOutcome settle_quarantined(const TakenRelease& taken, ReleaseAccounting accounting,
                                            AllocationReleaseState state, QuarantineReason reason,
                                            std::uint64_t retained_bytes) noexcept {
  const ResidualOwnership residual{state, reason, retained_bytes, reinterpret_cast<std::uintptr_t>(taken.ptr),
                                   taken.align};
  taken.mechanism.settle_quarantined(
      taken.slot, QuarantinedAllocation{taken.mechanism.allocation_identity(taken.name), residual.address, taken.bytes,
                                        taken.align, state, reason, retained_bytes});
  return AllocationReleaseOutcome::quarantined(accounting, residual);
}

AllocationReleaseOutcome execute_release(const TakenRelease& taken) noexcept {
  using Gate = Mechanism::Gate;
  using Kind = QuarantineReason::Kind;
  const std::size_t bytes = taken.bytes;
  const ReleaseAccounting nothing_unmapped = ReleaseAccounting::eager(bytes);
  switch (taken.mechanism.release_gate()) {
    case Gate::kAllowed: break;
    case Gate::kDeviceLost:
      return settle_quarantined(taken, nothing_unmapped, AllocationReleaseState::kDeviceLost,
                                QuarantineReason::of(Kind::kDeviceLost), bytes);
    case Gate::kTerminated:
      return settle_quarantined(taken, nothing_unmapped, AllocationReleaseState::kQuarantined,
                                QuarantineReason::of(Kind::kMechanismTerminated), bytes);
    case Gate::kPoisoned:
      return settle_quarantined(taken, nothing_unmapped, AllocationReleaseState::kQuarantined,
                                QuarantineReason::of(Kind::kStatePoisoned), bytes);
  }
  // No lock is held: the allocator may take its own locks or re-enter the registry.
  return settle_outcome(taken, taken.mechanism.allocator().release(taken.ptr, bytes, taken.align));
}

AllocationReleaseOutcome settle_outcome(const TakenRelease& taken, AllocationReleaseOutcome outcome) noexcept {
  using Kind = QuarantineReason::Kind;
  const std::size_t bytes = taken.bytes;
  const ReleaseAccounting nothing_unmapped = ReleaseAccounting::eager(bytes);
  switch (outcome.kind()) {
    case AllocationReleaseOutcome::Kind::kComplete: taken.mechanism.settle_released(taken.slot); return outcome;
    case AllocationReleaseOutcome::Kind::kQuarantined: {
      const ResidualOwnership residual = *outcome.residual();
      return settle_quarantined(taken, *outcome.accounting(), residual.state, residual.reason, residual.retained_bytes);
    }
    case AllocationReleaseOutcome::Kind::kFailed:
      // "Nothing changed" is no longer true: the live record is gone.
      return settle_quarantined(taken, nothing_unmapped, AllocationReleaseState::kQuarantined,
                                QuarantineReason::of(Kind::kAllocatorRefused), bytes);
  }
  return outcome;
}

}  // namespace ortmem::detail
