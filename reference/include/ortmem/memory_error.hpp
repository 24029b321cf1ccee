// ortmem/memory_error.hpp: the error vocabulary shared by mechanisms and
// governance.
//
// Four kinds, each carrying the facts a reader needs to act:
//   - tier exhausted: we declined; the tier has no room for the role.
//   - invalid request: the caller asked for something impossible (a
//     non-power-of-two alignment, a size that overflows when rounded).
//   - allocation failed: well formed and within budget, but the backing
//     allocator refused for a reason of its own. Its own words are kept
//     verbatim, because "out of memory" and "no context" both fail an
//     allocation and must never read the same.
//   - capacity unavailable: a capacity transfer came up short; the refusal
//     underneath it, when there is one, is kept as `cause` so callers can still
//     match on it.
// message() always says what was asked, what refused it, and what to do next.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ortmem/device.hpp"
#include "ortmem/memory_role.hpp"

namespace ortmem {

class MemoryError {
 public:
  enum class Kind : std::uint8_t {
    kTierExhausted,
    kInvalidRequest,
    kAllocationFailed,
    kCapacityUnavailable,
  };

  [[nodiscard]] static MemoryError tier_exhausted(Tier tier, std::uint64_t requested, std::uint64_t used,
                                                  std::uint64_t limit, MemoryRole role);
  [[nodiscard]] static MemoryError invalid_request(Tier tier, std::uint64_t requested, std::string reason);
  [[nodiscard]] static MemoryError allocation_failed(Tier tier, std::uint64_t requested, std::string backing_reason);
  [[nodiscard]] static MemoryError capacity_unavailable(Tier tier, std::uint64_t requested, std::uint64_t available,
                                                        MemoryRole role, std::string detail,
                                                        std::shared_ptr<const MemoryError> cause = nullptr);

  [[nodiscard]] Kind kind() const noexcept { return kind_; }
  [[nodiscard]] Tier tier() const noexcept { return tier_; }
  [[nodiscard]] std::uint64_t requested() const noexcept { return requested_; }
  // Tier exhausted only: bytes already leased, the ceiling, and limit - used.
  [[nodiscard]] std::uint64_t used() const noexcept { return used_; }
  [[nodiscard]] std::uint64_t limit() const noexcept { return limit_; }
  // Tier exhausted and capacity unavailable.
  [[nodiscard]] std::uint64_t available() const noexcept { return available_; }
  [[nodiscard]] MemoryRole role() const noexcept { return role_; }
  // Invalid request: what is wrong. Allocation failed: the backing allocator's
  // own words. Capacity unavailable: what this layer can say on its own.
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }
  // Capacity unavailable only: the refusal it reports, or null when this layer
  // decided on its own.
  [[nodiscard]] const std::shared_ptr<const MemoryError>& cause() const noexcept { return cause_; }

  // One human sentence: what was asked, what refused it, what to do.
  [[nodiscard]] std::string message() const;

 private:
  MemoryError(Kind kind, Tier tier, std::uint64_t requested) noexcept
      : kind_(kind), tier_(tier), requested_(requested) {}

  Kind kind_;
  Tier tier_;
  std::uint64_t requested_;
  std::uint64_t used_ = 0;
  std::uint64_t limit_ = 0;
  std::uint64_t available_ = 0;
  MemoryRole role_{};
  std::string reason_;
  std::shared_ptr<const MemoryError> cause_;
};

[[nodiscard]] std::string_view kind_name(MemoryError::Kind kind) noexcept;

}  // namespace ortmem
