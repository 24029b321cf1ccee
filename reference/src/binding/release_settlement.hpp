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

#include "ortmem/binding_identity.hpp"
#include "ortmem/binding.hpp"
#include "ortmem/release_outcome.hpp"

namespace ortmem::detail {

class Mechanism;

// An allocation whose live record was taken from `slot` for release.
struct TakenRelease {
  Mechanism& mechanism;
  const AllocationName& name;
  RecordSlot slot;
  void* ptr;
  std::size_t bytes;
  std::size_t align;
};

// Frees through the allocator if the mechanism's gate allows, and settles.
[[nodiscard]] AllocationReleaseOutcome execute_release(const TakenRelease& taken) noexcept;

// Records what a release that already ran reported, in place: Complete as
// released, Quarantined with its residual, and Failed as an allocator-refused
// quarantine, since the live record is gone. The gate is not read: the
// release happened, so the record must say what it did. In place because an
// outcome is large, and the common Complete one needs nothing rewritten.
void settle_outcome(const TakenRelease& taken, AllocationReleaseOutcome& outcome) noexcept;

// Settles as quarantined ownership without calling the allocator.
[[nodiscard]] AllocationReleaseOutcome settle_quarantined(const TakenRelease& taken, ReleaseAccounting accounting,
                                                          AllocationReleaseState state, QuarantineReason reason,
                                                          std::uint64_t retained_bytes) noexcept;

}  // namespace ortmem::detail
