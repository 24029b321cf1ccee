// conformance/suites/support/watchdog.hpp: a call a model-based test must see return, with
// a rescue for one that does not.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace ortmem::cts {

// Runs calls that must return by themselves, and rescues one that does not:
// once it has run for kStuck, `rescue` runs (on the watchdog's thread, again
// every kPatrol while the call is still stuck) to let it return, so the test
// can charge the rule the call broke instead of hanging, which would charge
// every requirement the test covers.
class Watchdog {
 public:
  Watchdog() : thread_([this] { patrol(); }) {}
  ~Watchdog() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Runs `call`; false when it needed `rescue` to return.
  template <class Call>
  bool unaided(const std::function<void()>& rescue, Call&& call) {
    {
      const std::lock_guard lock(mutex_);
      rescue_ = &rescue;
      since_ = std::chrono::steady_clock::now();
      rescued_ = false;
    }
    std::forward<Call>(call)();
    // Taken after the call, so a rescue still running has finished.
    const std::lock_guard lock(mutex_);
    rescue_ = nullptr;
    return !rescued_;
  }

 private:
  static constexpr auto kStuck = std::chrono::milliseconds(500);
  static constexpr auto kPatrol = std::chrono::milliseconds(20);

  void patrol() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, kPatrol);
      if (rescue_ != nullptr && std::chrono::steady_clock::now() - since_ > kStuck) {
        rescued_ = true;
        (*rescue_)();
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  const std::function<void()>* rescue_ = nullptr;
  std::chrono::steady_clock::time_point since_;
  bool rescued_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ortmem::cts
