// support/failing_new.cpp: TEST DOUBLE, see failing_new.hpp.
//
// Every non-aligned form is replaced so that sanitizers see one consistent
// malloc/free pairing (replacing only some forms would make ASan report
// alloc-dealloc mismatches). The aligned forms are left to the library.
#include "support/failing_new.hpp"

#include <cstdlib>
#include <new>

namespace {
// Constant-initialised and trivially destructible: safe to read from operator new at any time.
thread_local int armed_failures = 0;
}  // namespace

namespace ortmem::test_support {

void fail_next_allocations_on_this_thread(int count) noexcept { armed_failures = count; }
int unconsumed_allocation_failures() noexcept { return armed_failures; }

}  // namespace ortmem::test_support

void* operator new(std::size_t size) {
  if (armed_failures > 0) {
    --armed_failures;
    throw std::bad_alloc();
  }
  if (void* ptr = std::malloc(size == 0 ? 1 : size)) return ptr;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return ::operator new(size, std::nothrow); }
void operator delete(void* ptr) noexcept { std::free(ptr); }
void operator delete[](void* ptr) noexcept { std::free(ptr); }
void operator delete(void* ptr, std::size_t) noexcept { std::free(ptr); }
void operator delete[](void* ptr, std::size_t) noexcept { std::free(ptr); }
void operator delete(void* ptr, const std::nothrow_t&) noexcept { std::free(ptr); }
void operator delete[](void* ptr, const std::nothrow_t&) noexcept { std::free(ptr); }
