// ortmem/detail/active_operation.hpp: an in-flight operation on a mechanism.
//
// While one exists the mechanism is not quiescent: confirming its context's
// termination fails with not-quiescent, and removal is refused. Allocator
// callbacks and view callbacks each hold one (an unsettled prepared release
// counts the same, through its record shard's queued count instead), so
// "nothing is running" can be checked without any lock held across a callback.
// The mechanism must outlive the operation; every holder also holds a binding.
#pragma once

#include <atomic>
#include <cstddef>
#include <utility>

namespace ortmem::detail {

class ActiveOperation {
 public:
  // Adopts one count that the caller already added to `counter`.
  explicit ActiveOperation(std::atomic<std::size_t>& counter) noexcept : counter_(&counter) {}
  ActiveOperation(const ActiveOperation&) = delete;
  ActiveOperation& operator=(const ActiveOperation&) = delete;
  ActiveOperation(ActiveOperation&& other) noexcept : counter_(std::exchange(other.counter_, nullptr)) {}
  ActiveOperation& operator=(ActiveOperation&& other) noexcept {
    if (this != &other) {
      finish();
      counter_ = std::exchange(other.counter_, nullptr);
    }
    return *this;
  }
  ~ActiveOperation() { finish(); }

  void finish() noexcept {
    if (auto* counter = std::exchange(counter_, nullptr)) counter->fetch_sub(1, std::memory_order_acq_rel);
  }

 private:
  std::atomic<std::size_t>* counter_;
};

}  // namespace ortmem::detail
