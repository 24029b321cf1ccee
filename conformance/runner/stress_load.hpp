// stress_load.hpp: `--stress`, background load that shakes the scheduling of
// the tests it runs beside.
//
// A race between an adapter's threads shows only when they really overlap
// and are preempted at bad moments. While a StressLoad lives, one thread per
// core spins, yields and sleeps in random bursts, so the tests' threads are
// descheduled and migrated far more often than on an idle machine. Combined
// with --repeat (which --stress implies), a race gets many differently
// shaken chances to show; a test that then passes only sometimes is flaky.
#pragma once

#include <atomic>
#include <thread>
#include <vector>

namespace ortmem::cts {

class StressLoad {
 public:
  StressLoad();
  ~StressLoad();  // stops and joins the load threads
  StressLoad(const StressLoad&) = delete;
  StressLoad& operator=(const StressLoad&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace ortmem::cts
