// support/sanitizers.hpp: which sanitizer this build runs under.
//
// GCC says so with __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__; clang 14
// defines neither and answers __has_feature instead. The kit needs to know
// because both sanitizers reserve terabytes of shadow address space, so an
// address-space limit (the runner's guard on a child, one probe's way of
// making an allocation fail) breaks them, and because AddressSanitizer's
// quarantine holds freed memory a leak probe would count.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define ORTMEM_CTS_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ORTMEM_CTS_UNDER_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define ORTMEM_CTS_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ORTMEM_CTS_UNDER_TSAN 1
#endif
#endif

#if defined(ORTMEM_CTS_UNDER_ASAN) || defined(ORTMEM_CTS_UNDER_TSAN)
#define ORTMEM_CTS_UNDER_SANITIZER 1
#endif

namespace ortmem::cts {

// How many rounds to run of a probe whose rounds exist only to make a rare
// collision or a slow drift likely. A sanitizer reports an error the first
// time it happens (ThreadSanitizer two accesses that no synchronization
// orders, whether or not they collide; AddressSanitizer a bad access), and it
// makes such a probe 5 to 30 times slower (eight threads allocating through
// the simulated CUDA driver took over 60 s under TSan), so a sanitized kit
// runs a quarter of them. It hunts memory and thread errors; how hard the
// checks push a broken implementation is judged on the unsanitized build,
// where the known-bad adapters run. ThreadSanitizer still catches each race
// mutant in 20 runs of 20 (ctest -L race).
constexpr int probe_rounds(int unsanitized) {
#if defined(ORTMEM_CTS_UNDER_SANITIZER)
  return unsanitized / 4 > 0 ? unsanitized / 4 : 1;
#else
  return unsanitized;
#endif
}

// The step, as a shift, between the alignments a one-thread sweep visits:
// every power of two, but under ThreadSanitizer every fourth (1, 16, 256,
// ...). It reports only accesses that two threads make, so a sweep that
// runs on one thread gains it nothing point by point, while every point
// costs it shadow memory for each block mapped and filled (13 s for one
// sweep through the simulated CUDA driver). AddressSanitizer visits them
// all: each alignment can take its own path through an allocator.
constexpr unsigned one_thread_sweep_shift() {
#if defined(ORTMEM_CTS_UNDER_TSAN)
  return 4;
#else
  return 1;
#endif
}

}  // namespace ortmem::cts
