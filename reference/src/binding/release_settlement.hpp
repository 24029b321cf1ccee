// release_settlement.hpp (internal): how a release whose live record was
// taken settles.
//
// Once the record is gone the allocation belongs to nobody but this step, and
// its shard counts it as queued (so as an active operation) until it settles.
// Settling reads the mechanism's gate and, when the gate allows, calls the
// allocator with no lock held; every other path records quarantined ownership.
// It never reports Failed: "nothing changed" stopped being true when the
// record was taken. A prepared request settles through here, and so does
// OwningAllocation::release_now, in place, without building a request.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mechanism.hpp"
#include "ortmem/binding_identity.hpp"
#include "ortmem/binding.hpp"
#include "ortmem/release_outcome.hpp"

namespace ortmem::detail {

// An allocation whose live record was taken from `slot` for release.
struct TakenRelease {
  Mechanism& mechanism;
  const AllocationName& name;
  RecordSlot slot;
  void* ptr;
  std::size_t bytes;
  std::size_t align;
};

// The gate refused the allocator call: the allocation is quarantined whole.
[[nodiscard, gnu::cold]] AllocationReleaseOutcome quarantine_at_gate(const TakenRelease& taken,
                                                                     Mechanism::Gate gate) noexcept;
// settle_outcome() for anything but Complete.
[[gnu::cold]] void settle_incomplete(const TakenRelease& taken, AllocationReleaseOutcome& outcome) noexcept;

// Records what a release that already ran reported, in place: Complete as
// released, Quarantined with its residual, and Failed as an allocator-refused
// quarantine, since the live record is gone. The gate is not read: the
// release happened, so the record must say what it did. In place because an
// outcome is large, and the common Complete one needs nothing rewritten.
inline void settle_outcome(const TakenRelease& taken, AllocationReleaseOutcome& outcome) noexcept {
  if (outcome.is_complete()) [[likely]] {
    taken.mechanism.settle_released(taken.slot);
    return;
  }
  settle_incomplete(taken, outcome);
}

// Frees through the allocator if the mechanism's gate allows, and settles.
// Inline, with everything but a complete release out of line: it is the
// second half of every owning cycle.
[[nodiscard]] inline AllocationReleaseOutcome execute_release(const TakenRelease& taken) noexcept {
  // One named result and one return, so that the outcome is built where the
  // caller receives it (see ExecutedRelease).
  const Mechanism::Gate gate = taken.mechanism.release_gate();
  const bool allowed = gate == Mechanism::Gate::kAllowed;
  // No lock is held: the allocator may take its own locks or re-enter the registry.
  AllocationReleaseOutcome outcome = allowed ? taken.mechanism.allocator().release(taken.ptr, taken.bytes, taken.align)
                                             : quarantine_at_gate(taken, gate);
  if (allowed) settle_outcome(taken, outcome);
  return outcome;
}

// Converts to execute_release(taken)'s outcome, so that a result holding
// one (an Expected) is built from the allocator's own return, in place:
// Expected(tl::in_place, ExecutedRelease{taken}). Moved instead, the outcome
// was read back in wide loads over the allocator's narrower stores, and the
// load waited for every store to retire (a quarter of release_now's time).
struct ExecutedRelease {
  const TakenRelease& taken;
  // NOLINTNEXTLINE(google-explicit-constructor): the implicit conversion is the point
  operator AllocationReleaseOutcome() const noexcept { return execute_release(taken); }
};

// Settles as quarantined ownership without calling the allocator.
[[nodiscard]] AllocationReleaseOutcome settle_quarantined(const TakenRelease& taken, ReleaseAccounting accounting,
                                                          AllocationReleaseState state, QuarantineReason reason,
                                                          std::uint64_t retained_bytes) noexcept;

}  // namespace ortmem::detail
