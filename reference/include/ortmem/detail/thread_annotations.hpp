// ortmem/detail/thread_annotations.hpp (internal): clang's thread-safety
// attributes, spelled once.
//
// The clang builds (the asan and tsan presets, and so CI) compile with
// -Wthread-safety and -Werror, so a member marked ORTMEM_GUARDED_BY(lock)
// that is read or written without `lock` held, or a function marked
// ORTMEM_REQUIRES(lock) called without it, does not compile. ThreadSanitizer
// finds such a race only when a test happens to run it; the analysis finds it
// on every path, at compile time. Other compilers see nothing.
//
// The analysis follows only annotated locks and guards: a member guarded by
// an ortmem::detail::SpinLock or Mutex is locked through LockGuard, never
// through std::lock_guard (libstdc++'s guards carry no attributes). It skips
// constructors and destructors, where no other thread can see the object.
#pragma once

#if defined(__clang__)
#define ORTMEM_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define ORTMEM_THREAD_ANNOTATION(x)
#endif

// A type that is a lock (`name` appears in the analysis's messages).
#define ORTMEM_CAPABILITY(name) ORTMEM_THREAD_ANNOTATION(capability(name))
// A type whose objects hold a lock for their scope (a guard).
#define ORTMEM_SCOPED_CAPABILITY ORTMEM_THREAD_ANNOTATION(scoped_lockable)
// A member that may be read or written only with `lock` held.
#define ORTMEM_GUARDED_BY(lock) ORTMEM_THREAD_ANNOTATION(guarded_by(lock))
// A function that its caller must call with the locks held.
#define ORTMEM_REQUIRES(...) ORTMEM_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// A function that takes the locks itself, so its caller must not hold them.
#define ORTMEM_EXCLUDES(...) ORTMEM_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// A function that returns holding the locks (none named: the object itself).
#define ORTMEM_ACQUIRE(...) ORTMEM_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
// ORTMEM_TRY_ACQUIRE(result, locks...): returns holding the locks when it returns `result`.
#define ORTMEM_TRY_ACQUIRE(...) ORTMEM_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// A function that returns having let go of the locks.
#define ORTMEM_RELEASE(...) ORTMEM_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// A function the analysis does not check: only for code that locks by hand
// in a way no guard can express (a test that unlocks on another thread).
#define ORTMEM_NO_THREAD_SAFETY_ANALYSIS ORTMEM_THREAD_ANNOTATION(no_thread_safety_analysis)
