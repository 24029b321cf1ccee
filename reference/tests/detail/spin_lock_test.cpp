// The hot paths' spin lock: mutual exclusion under contention, and try_lock.
#include "ortmem/detail/spin_lock.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace ortmem::detail {
namespace {

TEST(SpinLock, ExcludesEveryOtherHolder) {
  SpinLock lock;
  std::uint64_t counter = 0;  // deliberately not atomic: only the lock protects it
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        const std::lock_guard held(lock);
        // A read, a yield point and a write: a second holder would lose updates.
        const std::uint64_t seen = counter;
        if (i % 1024 == 0) std::this_thread::yield();
        counter = seen + 1;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(counter, std::uint64_t{kThreads} * kRounds);
}

// This test takes the lock on one thread and lets go on another, which no
// guard expresses: these two are outside the thread-safety analysis.
bool try_lock_by_hand(SpinLock& lock) ORTMEM_NO_THREAD_SAFETY_ANALYSIS { return lock.try_lock(); }
void unlock_by_hand(SpinLock& lock) ORTMEM_NO_THREAD_SAFETY_ANALYSIS { lock.unlock(); }

TEST(SpinLock, TryLockFailsWhileHeldAndSucceedsAfter) {
  SpinLock lock;
  ASSERT_TRUE(try_lock_by_hand(lock));
  std::thread other([&] { EXPECT_FALSE(try_lock_by_hand(lock)) << "a held lock was taken twice"; });
  other.join();
  unlock_by_hand(lock);
  std::thread again([&] {
    EXPECT_TRUE(try_lock_by_hand(lock));
    unlock_by_hand(lock);
  });
  again.join();
}

}  // namespace
}  // namespace ortmem::detail
