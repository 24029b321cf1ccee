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
