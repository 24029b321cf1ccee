// conformance/suites/support/together.hpp: threads that start at one moment,
// and a spin that staggers their racing calls.
#pragma once

#include <atomic>
#include <thread>
#include <vector>

namespace ortmem::cts {

// Runs `body(thread)` on `threads` threads and joins them. Each waits at a
// start barrier until all exist, so their calls overlap from the first one
// instead of the first thread finishing before the last is created.
template <class Body>
void together(int threads, Body body) {
  std::atomic<int> ready{0};
  std::vector<std::thread> started;
  started.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    started.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < threads) std::this_thread::yield();
      body(t);
    });
  }
  for (auto& thread : started) thread.join();
}

// Busy-waits `iterations` steps, so a thread reaches its racing call a little
// later in each round and the meeting lands at every point of the other
// thread's call. Each step stores to an atomic, which the compiler cannot drop.
inline void spin(int iterations) {
  std::atomic<int> spun{0};
  for (; iterations > 0; --iterations) spun.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace ortmem::cts
