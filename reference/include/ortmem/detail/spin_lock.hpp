// ortmem/detail/spin_lock.hpp (internal): the lock of the hot paths' bookkeeping.
//
// For critical sections of a few dozen instructions that are almost never
// contended: a thread's own record shard, a deferred queue's entries. There a
// std::mutex costs more than the work it guards: a call into libpthread each
// way and two atomic read-modify-writes per lock and unlock, where this takes
// one exchange and unlocks with a plain release store.
//
// Never hold it across a call out (an allocator, a driver, a callback) or
// while waiting for anything: a waiter spins, then yields its CPU so that a
// holder preempted on a machine with few cores can run and let go.
//
// Meets the standard Lockable requirements (std::lock_guard, std::unique_lock,
// std::try_to_lock), so ThreadSanitizer sees its acquire and release as a lock.
// Lock it through LockGuard where it guards members (ORTMEM_GUARDED_BY): the
// thread-safety analysis follows only annotated guards.
#pragma once

#include <atomic>
#include <thread>

#include "ortmem/detail/thread_annotations.hpp"

namespace ortmem::detail {

class ORTMEM_CAPABILITY("spin lock") SpinLock {
 public:
  SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  void lock() noexcept ORTMEM_ACQUIRE() {
    if (!locked_.exchange(true, std::memory_order_acquire)) [[likely]] {
      return;
    }
    wait_then_lock();
  }

  [[nodiscard]] bool try_lock() noexcept ORTMEM_TRY_ACQUIRE(true) {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }

  void unlock() noexcept ORTMEM_RELEASE() { locked_.store(false, std::memory_order_release); }

 private:
  // Out of line, so that a caller's free path keeps its values in registers:
  // inlined, the possible yield is a call that every caller's live values
  // had to be saved around, on every lock.
  [[gnu::noinline, gnu::cold]] void wait_then_lock() noexcept {
    do {
      // Wait reading, not writing, so waiters do not steal the line from the holder.
      for (unsigned spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (spins >= kSpinsBeforeYield) std::this_thread::yield();
      }
    } while (locked_.exchange(true, std::memory_order_acquire));
  }

  // About the length of a critical section this lock is meant for.
  static constexpr unsigned kSpinsBeforeYield = 64;

  std::atomic<bool> locked_{false};
};

}  // namespace ortmem::detail
