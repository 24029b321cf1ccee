// ortmem/detail/mutex.hpp (internal): std::mutex, visible to the
// thread-safety analysis.
//
// For the locks of rare operations (registration, lifecycle transitions,
// snapshots), where a waiter should sleep rather than spin; a hot path's few
// instructions of bookkeeping take a SpinLock instead. Lock it through
// LockGuard, so that the members it guards (ORTMEM_GUARDED_BY) compile only
// under it.
#pragma once

#include <mutex>

#include "ortmem/detail/thread_annotations.hpp"

namespace ortmem::detail {

class ORTMEM_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ORTMEM_ACQUIRE() { mutex_.lock(); }
  [[nodiscard]] bool try_lock() ORTMEM_TRY_ACQUIRE(true) { return mutex_.try_lock(); }
  void unlock() ORTMEM_RELEASE() { mutex_.unlock(); }

 private:
  std::mutex mutex_;
};

}  // namespace ortmem::detail
