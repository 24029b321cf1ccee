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

}  // namespace ortmem::cts
