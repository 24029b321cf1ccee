// active_operation.hpp (internal): an in-flight operation on a mechanism.
//
// While one exists the mechanism is not quiescent: confirming its context's
// termination fails with not-quiescent, and removal is refused. Allocator
// callbacks and view callbacks each hold one (an unsettled prepared release
// counts the same, through its record shard's queued count instead), so
// "nothing is running" can be checked without any lock held across a callback.
// The mechanism must outlive the operation; every holder also holds a binding.
//
// The count an operation holds lives in one shard of the mechanism (the
// opening thread's), raised and lowered under that shard's lock: threads that
// work on one mechanism then never write a common cache line to count.
#pragma once

#include <cstddef>
#include <utility>

#include "ortmem/detail/lock_guard.hpp"
#include "published_count.hpp"
#include "ortmem/detail/spin_lock.hpp"
#include "ortmem/detail/thread_annotations.hpp"

namespace ortmem::detail {

class ActiveOperation {
 public:
  // Adopts one count that the caller added to `count` under `guard`.
  ActiveOperation(SpinLock& guard, PublishedCount& count) noexcept : guard_(&guard), count_(&count) {}
  ActiveOperation(const ActiveOperation&) = delete;
  ActiveOperation& operator=(const ActiveOperation&) = delete;
  ActiveOperation(ActiveOperation&& other) noexcept
      : guard_(std::exchange(other.guard_, nullptr)), count_(std::exchange(other.count_, nullptr)) {}
  // Never reassigned: an operation ends where it began, or is handed on whole.
  ActiveOperation& operator=(ActiveOperation&&) = delete;
  ~ActiveOperation() { finish(); }

  void finish() noexcept {
    if (count_ == nullptr) return;
    const LockGuard lock(*guard_);
    finish_holding(*guard_);
  }
  // Finishes inside a critical section of `held` that the caller is in, so
  // that the work done there and the end of the operation are one step. Does
  // nothing if the count is another lock's (taking it here could deadlock).
  void finish_holding(const SpinLock& held) noexcept ORTMEM_REQUIRES(held) {
    if (guard_ != &held) return;
    count_->lower();
    guard_ = nullptr;
    count_ = nullptr;
  }

 private:
  SpinLock* guard_;
  PublishedCount* count_;
};

}  // namespace ortmem::detail
