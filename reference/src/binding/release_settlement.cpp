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

AllocationReleaseOutcome quarantine_at_gate(const TakenRelease& taken, Mechanism::Gate gate) noexcept {
  using Gate = Mechanism::Gate;
  using Kind = QuarantineReason::Kind;
  const ReleaseAccounting nothing_unmapped = ReleaseAccounting::eager(taken.bytes);
  switch (gate) {
    case Gate::kDeviceLost:
      return settle_quarantined(taken, nothing_unmapped, AllocationReleaseState::kDeviceLost,
                                QuarantineReason::of(Kind::kDeviceLost), taken.bytes);
    case Gate::kTerminated:
      return settle_quarantined(taken, nothing_unmapped, AllocationReleaseState::kQuarantined,
                                QuarantineReason::of(Kind::kMechanismTerminated), taken.bytes);
    default:  // kPoisoned; never called with kAllowed
      return settle_quarantined(taken, nothing_unmapped, AllocationReleaseState::kQuarantined,
                                QuarantineReason::of(Kind::kStatePoisoned), taken.bytes);
  }
}

void settle_incomplete(const TakenRelease& taken, AllocationReleaseOutcome& outcome) noexcept {
  if (outcome.is_quarantined()) {
    const ResidualOwnership residual = *outcome.residual();
    outcome =
        settle_quarantined(taken, *outcome.accounting(), residual.state, residual.reason, residual.retained_bytes);
    return;
  }
  // Failed: "nothing changed" is no longer true, since the live record is gone.
  outcome = settle_quarantined(taken, ReleaseAccounting::eager(taken.bytes), AllocationReleaseState::kQuarantined,
                               QuarantineReason::of(QuarantineReason::Kind::kAllocatorRefused), taken.bytes);
}

}  // namespace ortmem::detail
