// ortmem/mechanism/host_stream.hpp: a host stand-in for a device stream, and
// its fences.
//
// Work is submitted in order and completes in order, as on a CUDA stream.
// submit() returns the ticket of a new piece of work; whoever runs the work
// calls complete_through(ticket) when everything up to it has finished.
//
// As StreamFences, a fence is the last submitted ticket and passes once
// completed() reaches it: recording never fails, nothing is held per fence
// (discard does nothing), no fence is ever broken, and both are one atomic
// load, callable under a queue's lock. The host deferred
// release queue is a FencedDeferredQueue over one of these. Thread-safe,
// lock-free.
#pragma once

#include <atomic>
#include <cstdint>

#include "ortmem/mechanism/stream_fences.hpp"

namespace ortmem::mechanism {

class HostStream final : public StreamFences {
 public:
  // A new piece of work; its ticket is one more than the last.
  std::uint64_t submit() noexcept { return submitted_.fetch_add(1, std::memory_order_acq_rel) + 1; }
  // Everything up to `ticket` has finished. Completion never moves backwards.
  void complete_through(std::uint64_t ticket) noexcept {
    std::uint64_t seen = completed_.load(std::memory_order_relaxed);
    while (seen < ticket && !completed_.compare_exchange_weak(seen, ticket, std::memory_order_acq_rel)) {
    }
  }
  // Marks all submitted work finished.
  void complete_all() noexcept { complete_through(submitted()); }

  [[nodiscard]] std::uint64_t submitted() const noexcept { return submitted_.load(std::memory_order_acquire); }
  [[nodiscard]] std::uint64_t completed() const noexcept { return completed_.load(std::memory_order_acquire); }

  [[nodiscard]] Expected<FenceToken, std::string> record() noexcept override { return submitted(); }
  [[nodiscard]] FenceState query(FenceToken fence) noexcept override {
    return completed() >= fence ? FenceState::kPassed : FenceState::kPending;
  }
  void discard(FenceToken) noexcept override {}
  [[nodiscard]] bool callable_under_lock() const noexcept override { return true; }

 private:
  std::atomic<std::uint64_t> submitted_{0};
  std::atomic<std::uint64_t> completed_{0};
};

}  // namespace ortmem::mechanism
