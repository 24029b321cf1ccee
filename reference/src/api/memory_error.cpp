#include "ortmem/memory_error.hpp"

#include <utility>

namespace ortmem {

MemoryError MemoryError::tier_exhausted(Tier tier, std::uint64_t requested, std::uint64_t used, std::uint64_t limit,
                                        MemoryRole role) {
  MemoryError error(Kind::kTierExhausted, tier, requested);
  error.used_ = used;
  error.limit_ = limit;
  error.available_ = limit > used ? limit - used : 0;
  error.role_ = role;
  return error;
}

MemoryError MemoryError::invalid_request(Tier tier, std::uint64_t requested, std::string reason) {
  MemoryError error(Kind::kInvalidRequest, tier, requested);
  error.reason_ = std::move(reason);
  return error;
}

MemoryError MemoryError::allocation_failed(Tier tier, std::uint64_t requested, std::string backing_reason) {
  MemoryError error(Kind::kAllocationFailed, tier, requested);
  error.reason_ = std::move(backing_reason);
  return error;
}

MemoryError MemoryError::capacity_unavailable(Tier tier, std::uint64_t requested, std::uint64_t available,
                                              MemoryRole role, std::string detail,
                                              std::shared_ptr<const MemoryError> cause) {
  MemoryError error(Kind::kCapacityUnavailable, tier, requested);
  error.available_ = available;
  error.role_ = role;
  error.reason_ = std::move(detail);
  error.cause_ = std::move(cause);
  return error;
}

std::string MemoryError::message() const {
  const std::string tier(tier_name(tier_));
  const std::string asked = std::to_string(requested_) + " bytes of " + tier + " memory";
  switch (kind_) {
    case Kind::kTierExhausted:
      return "cannot reserve " + asked + " for " + to_string(role_) + ": " + std::to_string(used_) + " of " +
             std::to_string(limit_) + " bytes are already leased, leaving " + std::to_string(available_) +
             "; free memory by closing sessions, lower the demand, or raise the " + tier + " limit";
    case Kind::kInvalidRequest:
      return "cannot allocate " + asked + ": the request is invalid: " + reason_ +
             "; fix the request (size and alignment) and try again";
    case Kind::kAllocationFailed:
      return "cannot allocate " + asked + ": the backing allocator refused: " + reason_ +
             "; check the backing allocator's state (free memory, device context) before retrying";
    case Kind::kCapacityUnavailable: {
      std::string text = "cannot make " + asked + " available for " + to_string(role_) + ": only " +
                         std::to_string(available_) + " bytes became available; " + reason_;
      if (cause_) text += "; caused by: " + cause_->message();
      return text;
    }
  }
  return "unknown memory error";
}

std::string_view kind_name(MemoryError::Kind kind) noexcept {
  switch (kind) {
    case MemoryError::Kind::kTierExhausted: return "tier-exhausted";
    case MemoryError::Kind::kInvalidRequest: return "invalid-request";
    case MemoryError::Kind::kAllocationFailed: return "allocation-failed";
    case MemoryError::Kind::kCapacityUnavailable: return "capacity-unavailable";
  }
  return "unknown";
}

}  // namespace ortmem
