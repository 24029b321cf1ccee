// ortmem/release_outcome.hpp: what is true after one whole-allocation release.
//
// The vocabulary distinguishes "the bytes are gone" from "we still own
// something we could not give back". An allocator's release returns exactly
// one of three outcomes:
//   - Complete(accounting): the whole allocation is gone (freed or pooled).
//     Zero unmapped bytes is a valid complete result, never a failure signal.
//   - Failed(reason): allowed ONLY when nothing was mutated; the allocation is
//     still live and may be released again. It is the one shape that means
//     "unchanged", so no other path may imply it.
//   - Quarantined(accounting, residual): anything partial. `accounting` tells
//     what was actually unmapped, `residual` what the runtime still owns.
// The same states are used by owners, prepared requests and snapshots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ortmem {

// Where one allocation's ownership sits.
enum class AllocationReleaseState : std::uint8_t {
  kLive,               // live and mapped: readable, viewable, releasable
  kQueued,             // final ownership detached from the live record, not yet freed
  kPartiallyUnmapped,  // the allocator unmapped part and stopped; never reuse it
  kReleased,           // given back (freed or pooled): the only successful terminal state
  kDeviceLost,         // device/context lost: no allocator call is ever made again
  kQuarantined,        // retained deliberately because releasing would be unsafe or dishonest
};

// The runtime still owns physical bytes: every state except released.
[[nodiscard]] constexpr bool retains_ownership(AllocationReleaseState state) noexcept {
  return state != AllocationReleaseState::kReleased;
}
// An allocator callback may still be made: live and queued only. Device loss is
// excluded by construction, in every phase.
[[nodiscard]] constexpr bool permits_allocator_call(AllocationReleaseState state) noexcept {
  return state == AllocationReleaseState::kLive || state == AllocationReleaseState::kQueued;
}
// No further transition without external teardown.
[[nodiscard]] constexpr bool is_terminal(AllocationReleaseState state) noexcept {
  return !permits_allocator_call(state);
}
// "live", "queued", "partially-unmapped", "released", "device-lost", "quarantined".
[[nodiscard]] std::string_view state_name(AllocationReleaseState state) noexcept;

// Byte accounting for one release attempt.
struct ReleaseAccounting {
  std::uint64_t allocation_bytes = 0;  // the whole-allocation size released
  std::uint64_t unmapped_bytes = 0;    // bytes whose mapping went away (0 for eager allocators)

  // An eager allocator has no mapped attribution.
  [[nodiscard]] static constexpr ReleaseAccounting eager(std::uint64_t allocation_bytes) noexcept {
    return {allocation_bytes, 0};
  }
  friend constexpr bool operator==(ReleaseAccounting, ReleaseAccounting) noexcept = default;
};

// Why a deferred release queue refused final ownership. When several apply the
// queue reports the first of: device-lost, closed, full.
enum class DeferredEnqueueRejection : std::uint8_t {
  kClosed,      // shutting down or already drained
  kFull,        // bounded and full
  kDeviceLost,  // the queue observed device loss and accepts no allocator work
  kRefused,     // implementation-specific (e.g. a fence could not be recorded)
};
[[nodiscard]] std::string_view rejection_name(DeferredEnqueueRejection rejection) noexcept;

// The ranking above, stated once for every queue: what a queue in this state
// (holding `pending` requests, bounded by `capacity` if set) must answer, or
// nullopt when none of the three applies.
[[nodiscard]] constexpr std::optional<DeferredEnqueueRejection> first_rejection(
    bool device_lost, bool closed, std::size_t pending, std::optional<std::size_t> capacity) noexcept {
  if (device_lost) return DeferredEnqueueRejection::kDeviceLost;
  if (closed) return DeferredEnqueueRejection::kClosed;
  if (capacity && pending >= *capacity) return DeferredEnqueueRejection::kFull;
  return std::nullopt;
}

// Why ownership was retained instead of released.
struct QuarantineReason {
  enum class Kind : std::uint8_t {
    kAbandonedRequest,     // a prepared request was destroyed without executing
    kOwnerDropped,         // an owner was destroyed without a consuming release
    kEnqueueRejected,      // the queue refused; `rejection` says how
    kDeviceLost,           // the allocator must not be called
    kMechanismTerminated,  // the mechanism was terminated before release ran
    kPartialRelease,       // the allocator mutated part of the allocation, then stopped
    kAllocatorRefused,     // Failed after prepare: the live record is already gone
    kStatePoisoned,        // mechanism state could not be settled safely
  };

  Kind kind = Kind::kAbandonedRequest;
  DeferredEnqueueRejection rejection = DeferredEnqueueRejection::kRefused;  // kEnqueueRejected only

  [[nodiscard]] static constexpr QuarantineReason of(Kind kind) noexcept { return {kind, {}}; }
  [[nodiscard]] static constexpr QuarantineReason enqueue_rejected(DeferredEnqueueRejection rejection) noexcept {
    return {Kind::kEnqueueRejected, rejection};
  }
  friend constexpr bool operator==(QuarantineReason a, QuarantineReason b) noexcept {
    return a.kind == b.kind && (a.kind != Kind::kEnqueueRejected || a.rejection == b.rejection);
  }
};
// A short stable name: "abandoned-request", "enqueue-rejected(full)", ...
[[nodiscard]] std::string reason_name(QuarantineReason reason);
// The same reason as a sentence for messages.
[[nodiscard]] std::string describe(QuarantineReason reason);

// What the runtime still owns after a non-complete release.
struct ResidualOwnership {
  // partially-unmapped when anything is still mapped, otherwise quarantined or
  // device-lost.
  AllocationReleaseState state = AllocationReleaseState::kQuarantined;
  QuarantineReason reason;
  std::uint64_t retained_bytes = 0;  // the allocation size when nothing was released
  std::uintptr_t address = 0;        // for reconciliation only; never dereferenced
  std::size_t align = 0;

  friend bool operator==(const ResidualOwnership&, const ResidualOwnership&) = default;
};

// A release refused before any mutation. Only an allocator produces it.
class ReleaseFailure {
 public:
  explicit ReleaseFailure(std::string reason) : reason_(std::make_shared<const std::string>(std::move(reason))) {}
  [[nodiscard]] const std::string& reason() const noexcept { return *reason_; }
  friend bool operator==(const ReleaseFailure& a, const ReleaseFailure& b) { return a.reason() == b.reason(); }

 private:
  ReleaseFailure() = default;
  friend class AllocationReleaseOutcome;

  // Shared so outcomes copy without allocating on the release path.
  std::shared_ptr<const std::string> reason_;
};

class AllocationReleaseOutcome {
 public:
  enum class Kind : std::uint8_t { kComplete, kQuarantined, kFailed };

  [[nodiscard]] static AllocationReleaseOutcome complete(ReleaseAccounting accounting) noexcept {
    return AllocationReleaseOutcome(Kind::kComplete, accounting, {}, {});
  }
  [[nodiscard]] static AllocationReleaseOutcome quarantined(ReleaseAccounting accounting,
                                                            ResidualOwnership residual) noexcept {
    return AllocationReleaseOutcome(Kind::kQuarantined, accounting, residual, {});
  }
  [[nodiscard]] static AllocationReleaseOutcome failed(std::string reason) {
    return AllocationReleaseOutcome(Kind::kFailed, {}, {}, ReleaseFailure(std::move(reason)));
  }

  [[nodiscard]] Kind kind() const noexcept { return kind_; }
  [[nodiscard]] bool is_complete() const noexcept { return kind_ == Kind::kComplete; }
  [[nodiscard]] bool is_quarantined() const noexcept { return kind_ == Kind::kQuarantined; }
  [[nodiscard]] bool is_failed() const noexcept { return kind_ == Kind::kFailed; }

  // The state the outcome leaves the allocation in. Failed means nothing was
  // mutated, so the allocation is exactly as live as before.
  [[nodiscard]] AllocationReleaseState state() const noexcept;
  // Complete and quarantined only; a failed release has no accounting.
  [[nodiscard]] const ReleaseAccounting* accounting() const noexcept {
    return kind_ == Kind::kFailed ? nullptr : &accounting_;
  }
  [[nodiscard]] const ResidualOwnership* residual() const noexcept {
    return kind_ == Kind::kQuarantined ? &residual_ : nullptr;
  }
  [[nodiscard]] const ReleaseFailure* failure() const noexcept { return kind_ == Kind::kFailed ? &failure_ : nullptr; }
  // Zero when nothing was mutated.
  [[nodiscard]] std::uint64_t unmapped_bytes() const noexcept {
    return kind_ == Kind::kFailed ? 0 : accounting_.unmapped_bytes;
  }

  [[nodiscard]] std::string describe() const;

  friend bool operator==(const AllocationReleaseOutcome& a, const AllocationReleaseOutcome& b);

 private:
  AllocationReleaseOutcome(Kind kind, ReleaseAccounting accounting, ResidualOwnership residual,
                           ReleaseFailure failure) noexcept
      : kind_(kind), accounting_(accounting), residual_(residual), failure_(std::move(failure)) {}

  Kind kind_;
  ReleaseAccounting accounting_;
  ResidualOwnership residual_;
  ReleaseFailure failure_;  // kFailed only
};

}  // namespace ortmem
