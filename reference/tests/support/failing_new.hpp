// support/failing_new.hpp: TEST DOUBLE for running out of host memory.
//
// failing_new.cpp replaces the global (non-aligned) operator new/delete of the
// test executable with malloc/free plus one switch: a thread can ask for its
// next N allocations to throw std::bad_alloc. Other threads, and the arming
// thread once the budget is spent, allocate normally. This is the only way to
// reach the registry's out-of-memory paths (for example the state-poisoned
// gate) deterministically.
#pragma once

namespace ortmem::test_support {

// The next `count` operator-new calls on this thread throw std::bad_alloc.
void fail_next_allocations_on_this_thread(int count) noexcept;
// How many armed failures this thread has not consumed yet.
[[nodiscard]] int unconsumed_allocation_failures() noexcept;

}  // namespace ortmem::test_support
