// ortmem/host/host_stream.hpp: a host stand-in for a device stream.
//
// Work is submitted in order and completes in order, as on a CUDA stream.
// submit() returns the ticket of a new piece of work; whoever runs the work
// calls complete_through(ticket) when everything up to it has finished. A
// fence recorded at ticket t is observed once completed() >= t, which is
// what the host deferred release queue waits for. Thread-safe, lock-free.
#pragma once

#include <atomic>
#include <cstdint>

namespace ortmem::host {

class HostStream {
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

 private:
  std::atomic<std::uint64_t> submitted_{0};
  std::atomic<std::uint64_t> completed_{0};
};

}  // namespace ortmem::host
