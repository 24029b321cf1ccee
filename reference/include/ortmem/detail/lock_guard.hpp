// ortmem/detail/lock_guard.hpp (internal): the scoped guard of the annotated
// locks (SpinLock, Mutex), which the thread-safety analysis can follow.
//
// Holds the lock from construction to destruction, like std::lock_guard; like
// std::unique_lock it can let go and take the lock again inside its scope
// (unlock() and lock()), so a loop can drop the lock around a call out. The
// analysis knows at each point whether the guard holds the lock, and the
// destructor lets go only if it does.
//
// Example:
//   const LockGuard lock(shard.guard);
//   ++shard.queued;  // ORTMEM_GUARDED_BY(guard): compiles only under the lock
#pragma once

#include "ortmem/detail/thread_annotations.hpp"

namespace ortmem::detail {

template <class Lockable>
class ORTMEM_SCOPED_CAPABILITY LockGuard {
 public:
  explicit LockGuard(Lockable& lock) ORTMEM_ACQUIRE(lock) : lock_(lock) { lock_.lock(); }
  ~LockGuard() ORTMEM_RELEASE() {
    if (held_) lock_.unlock();
  }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

  // Let go inside the scope; the guard must hold the lock.
  void unlock() ORTMEM_RELEASE() {
    lock_.unlock();
    held_ = false;
  }
  // Take it again; the guard must not hold it.
  void lock() ORTMEM_ACQUIRE() {
    lock_.lock();
    held_ = true;
  }

 private:
  Lockable& lock_;
  bool held_ = true;
};

}  // namespace ortmem::detail
