#include "stress_load.hpp"

#include <sched.h>

#include <chrono>
#include <random>

namespace ortmem::cts {

StressLoad::StressLoad() {
  const unsigned cores = std::max(1U, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < cores; ++i) {
    threads_.emplace_back([this, seed = std::random_device{}()] {
      std::minstd_rand random(seed);
      volatile unsigned sink = 0;
      while (!stop_.load(std::memory_order_relaxed)) {
        switch (random() % 3) {
          case 0:  // a burst of work: the tests' threads lose their core
            for (auto spin = random() % 200000; spin > 0; --spin) sink = sink + static_cast<unsigned>(spin);
            break;
          case 1: sched_yield(); break;
          default: std::this_thread::sleep_for(std::chrono::microseconds(random() % 200));
        }
      }
    });
  }
}

StressLoad::~StressLoad() {
  stop_ = true;
  for (auto& thread : threads_) thread.join();
}

}  // namespace ortmem::cts
