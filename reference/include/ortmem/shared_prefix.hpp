// ortmem/shared_prefix.hpp: physical bytes owned once and mapped read-only into
// several allocations (for example a KV-cache prefix shared between requests).
//
// A prefix is created by a SharedMapping capability, which charges its
// physical bytes once. Every later mapping into an allocation adds mapped
// bytes but no owned bytes. The physical bytes live as long as the prefix
// handle or any mapping of it, and are freed exactly once, whichever goes last.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ortmem {

class SharedDevicePrefix {
 public:
  virtual ~SharedDevicePrefix() = default;
  // The owner's read-write window over the prefix (a device address).
  [[nodiscard]] virtual std::uint64_t device_ptr() const noexcept = 0;
  // Physical bytes this prefix owns.
  [[nodiscard]] virtual std::uint64_t committed_physical_bytes() const noexcept = 0;
  // The bytes one mapping occupies: requested_bytes rounded up to whole granules.
  [[nodiscard]] virtual std::size_t mapped_bytes() const noexcept = 0;
  [[nodiscard]] virtual std::size_t requested_bytes() const noexcept = 0;

 protected:
  SharedDevicePrefix() = default;
};

// The accounting of mapping one prefix into one allocation.
struct SharedPrefixCommitInfo {
  // Zero for a valid mapping: the prefix was charged once, at creation.
  std::uint64_t additional_owned_bytes = 0;
  std::uint64_t newly_mapped_bytes = 0;
  std::size_t granules = 0;
  friend constexpr bool operator==(SharedPrefixCommitInfo, SharedPrefixCommitInfo) noexcept = default;
};

}  // namespace ortmem
