// ortmem/mechanism/fault_plan.hpp: a plan that makes the Nth call of a kind fail, so
// partial failures can be tested deterministically.
//
// A mechanism routes each fallible call of a kind (a system call, a driver
// entry point) through one plan. A plan is shared (one per adapter) and
// thread-safe: each call of a kind takes the next number of that kind, and
// the call whose number was armed fails instead of reaching the system.
// Counting starts when the plan is made, so fail_nth(kind, 1) means "the very
// next call", whatever ran before.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ortmem::mechanism {

template <class Kind, std::size_t kKinds>
class FaultPlan {
 public:
  // The `nth` call of `kind` from now on (1 = the very next) fails.
  void fail_nth(Kind kind, std::uint64_t nth) noexcept {
    auto& slot = slots_[static_cast<std::size_t>(kind)];
    slot.armed.store(slot.calls.load(std::memory_order_acquire) + nth, std::memory_order_release);
  }
  void clear() noexcept {
    for (auto& slot : slots_) slot.armed.store(0, std::memory_order_release);
  }
  // Counts one call of `kind`; true when this call must fail.
  [[nodiscard]] bool should_fail(Kind kind) noexcept {
    auto& slot = slots_[static_cast<std::size_t>(kind)];
    const std::uint64_t number = slot.calls.fetch_add(1, std::memory_order_acq_rel) + 1;
    return number == slot.armed.load(std::memory_order_acquire);
  }

 private:
  struct Slot {
    std::atomic<std::uint64_t> calls{0};
    std::atomic<std::uint64_t> armed{0};  // 0: nothing armed
  };
  std::array<Slot, kKinds> slots_;
};

}  // namespace ortmem::mechanism
