// lifecycle_gate.hpp (internal): a mechanism's lifecycle and its count of
// active operations, in ONE atomic word.
//
// Why one word: "an operation is counted only while the lifecycle allows it"
// and "confirmation sees lifecycle device-lost AND zero operations" must each
// be a single indivisible step. With the two in separate places, either a lock
// is needed around both (a lock on every operation) or a refused operation
// would bump the count for an instant and a concurrent confirmation could be
// refused as not-quiescent by an operation that never ran. Here an operation
// is opened by one compare-exchange that fails, changing nothing, when the
// lifecycle does not allow it; finishing is a plain decrement of the low bits
// (ActiveOperation), which never borrows from the lifecycle bits because
// every decrement matches an increment.
//
// Lifecycle transitions are made by the mechanism under its own lock (so the
// loss reason is published with them); they keep the count unchanged.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "ortmem/detail/active_operation.hpp"
#include "ortmem/mechanism_snapshot.hpp"

namespace ortmem::detail {

class LifecycleGate {
 public:
  struct State {
    MechanismLifecycle lifecycle;
    std::size_t active;
  };

  [[nodiscard]] State load() const noexcept { return decode(word_.load(std::memory_order_acquire)); }

  // Counts one operation if the lifecycle is active (or, with
  // `retired_allowed`, retired) and returns it; otherwise counts nothing and
  // reports the lifecycle that refused it.
  [[nodiscard]] bool try_open(bool retired_allowed, MechanismLifecycle& refused_by) noexcept {
    std::size_t word = word_.load(std::memory_order_relaxed);
    for (;;) {
      const MechanismLifecycle lifecycle = lifecycle_of(word);
      const bool allowed = lifecycle == MechanismLifecycle::kActive ||
                           (retired_allowed && lifecycle == MechanismLifecycle::kRetired);
      if (!allowed) {
        refused_by = lifecycle;
        return false;
      }
      if (word_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) {
        return true;
      }
    }
  }
  // Wraps the count try_open() added.
  [[nodiscard]] ActiveOperation adopt_opened() noexcept { return ActiveOperation(word_); }

  // Moves to `to` and returns true, unless the current lifecycle is one of
  // those `from` excludes; the count is untouched.
  template <class Allowed>
  bool transition(Allowed from, MechanismLifecycle to) noexcept {
    std::size_t word = word_.load(std::memory_order_relaxed);
    for (;;) {
      if (!from(lifecycle_of(word))) return false;
      const std::size_t next = (word & kCountMask) | (static_cast<std::size_t>(to) << kShift);
      if (word_.compare_exchange_weak(word, next, std::memory_order_acq_rel, std::memory_order_relaxed)) return true;
    }
  }

 private:
  static constexpr unsigned kShift = 62;
  static constexpr std::size_t kCountMask = (std::size_t{1} << kShift) - 1;
  static_assert(sizeof(std::size_t) == 8, "the gate packs a lifecycle and a count into one 64-bit word");
  static_assert(static_cast<unsigned>(MechanismLifecycle::kActive) == 0 &&
                    static_cast<unsigned>(MechanismLifecycle::kTerminated) < 4,
                "a lifecycle fits the gate's two top bits and active is zero");

  static MechanismLifecycle lifecycle_of(std::size_t word) noexcept {
    return static_cast<MechanismLifecycle>(word >> kShift);
  }
  static State decode(std::size_t word) noexcept { return {lifecycle_of(word), word & kCountMask}; }

  // Starts active (0) with nothing in flight.
  std::atomic<std::size_t> word_{0};
};

}  // namespace ortmem::detail
