// ortmem/mechanism_snapshot.hpp: what the registry can say about a mechanism
// without asking it anything.
//
// A snapshot never calls a provider; it reads the registry's own records.
// Quarantined ownership stays listed (QuarantinedAllocation) until confirmed
// context termination discharges it, and blocks removal until then.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ortmem/binding_identity.hpp"
#include "ortmem/release_outcome.hpp"

namespace ortmem {

// Whether one allocator supplies its own capabilities, or a registrar attested
// that a wrapper routes allocation, capabilities and release to one coherent
// mechanism.
enum class MechanismCoherence : std::uint8_t { kSelfContained, kTrustedComposite };

// active -> retired -> (removed); active/retired -> device-lost -> terminated.
enum class MechanismLifecycle : std::uint8_t {
  kActive,      // new work accepted
  kRetired,     // no new work; existing allocations may still be released
  kDeviceLost,  // every operation refused, release included; the allocator is never called again
  kTerminated,  // external termination confirmed; metadata is terminal
};

[[nodiscard]] std::string_view coherence_name(MechanismCoherence coherence) noexcept;
[[nodiscard]] std::string_view lifecycle_name(MechanismLifecycle lifecycle) noexcept;

struct MechanismSnapshot {
  MechanismIdentity identity;
  DeviceKey device;
  ProviderContextIdentity provider_context;
  AuthorityIdentity authority;
  MechanismCoherence coherence = MechanismCoherence::kSelfContained;
  MechanismLifecycle lifecycle = MechanismLifecycle::kActive;
  std::size_t live_allocations = 0;
  std::size_t active_operations = 0;  // in-flight callbacks and unsettled prepared releases
  std::size_t queued_releases = 0;    // prepared releases that have not settled
  std::size_t quarantined_allocations = 0;
  std::uint64_t quarantined_bytes = 0;

  // Removal is unsafe while anything is still owned.
  [[nodiscard]] bool retains_ownership() const noexcept {
    return live_allocations != 0 || queued_releases != 0 || quarantined_allocations != 0;
  }
  friend bool operator==(const MechanismSnapshot&, const MechanismSnapshot&) = default;
};

// One allocation whose ownership was retained instead of released.
struct QuarantinedAllocation {
  AllocationIdentity identity;
  std::uintptr_t address = 0;  // never dereferenced
  std::size_t bytes = 0;
  std::size_t align = 0;
  AllocationReleaseState state = AllocationReleaseState::kQuarantined;
  QuarantineReason reason;
  std::uint64_t retained_bytes = 0;
  friend bool operator==(const QuarantinedAllocation&, const QuarantinedAllocation&) = default;
};

}  // namespace ortmem
