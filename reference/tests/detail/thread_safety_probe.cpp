// Compiled by ctest with clang's -Wthread-safety -Werror, never linked: shows
// that the annotations of ortmem/detail/thread_annotations.hpp bite. With no
// probe defined it must compile (every access holds its lock); each probe is
// one way to break a lock's contract, and must be refused with the analysis's
// own message (CMakeLists.txt registers one test per probe).
#include <mutex>

#include "ortmem/detail/lock_guard.hpp"
#include "ortmem/detail/mutex.hpp"
#include "ortmem/detail/spin_lock.hpp"
#include "ortmem/detail/thread_annotations.hpp"

namespace {

struct Guarded {
  ortmem::detail::Mutex mutex;
  int by_mutex ORTMEM_GUARDED_BY(mutex) = 0;
  ortmem::detail::SpinLock spin;
  int by_spin ORTMEM_GUARDED_BY(spin) = 0;
  void needs_spin() ORTMEM_REQUIRES(spin) { ++by_spin; }
};

// Every way the kit holds a lock: a guard, a guard that lets go and takes
// the lock again inside its scope, and a call that requires the lock.
[[maybe_unused]] int holding(Guarded& guarded) {
  ortmem::detail::LockGuard lock(guarded.mutex);
  int seen = guarded.by_mutex;
  lock.unlock();
  lock.lock();
  seen += guarded.by_mutex;
  const ortmem::detail::LockGuard spin(guarded.spin);
  guarded.needs_spin();
  return seen + guarded.by_spin;
}

#if defined(ORTMEM_PROBE_READ_WITHOUT_LOCK)
[[maybe_unused]] int probe(Guarded& guarded) { return guarded.by_mutex; }
#elif defined(ORTMEM_PROBE_WRITE_WITHOUT_LOCK)
[[maybe_unused]] void probe(Guarded& guarded) { guarded.by_spin = 1; }
#elif defined(ORTMEM_PROBE_READ_AFTER_UNLOCK)
[[maybe_unused]] int probe(Guarded& guarded) {
  ortmem::detail::LockGuard lock(guarded.mutex);
  lock.unlock();
  return guarded.by_mutex;
}
#elif defined(ORTMEM_PROBE_CALL_WITHOUT_LOCK)
[[maybe_unused]] void probe(Guarded& guarded) { guarded.needs_spin(); }
#elif defined(ORTMEM_PROBE_WRONG_LOCK)
[[maybe_unused]] int probe(Guarded& guarded) {
  const ortmem::detail::LockGuard lock(guarded.spin);
  return guarded.by_mutex;
}
#elif defined(ORTMEM_PROBE_STD_LOCK_GUARD)
// libstdc++'s guard carries no attributes, so the analysis cannot see it
// lock: why the kit locks annotated locks through LockGuard only.
[[maybe_unused]] int probe(Guarded& guarded) {
  const std::lock_guard lock(guarded.mutex);
  return guarded.by_mutex;
}
#endif

}  // namespace
