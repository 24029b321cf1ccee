// ortmem/host/host_deferred_queue.hpp: the reference deferred release queue.
//
// One queue per provider context and stream. enqueue() records a fence (the
// stream's last submitted ticket: the work that may still use the memory) and
// never blocks. poll() executes, in FIFO order and exactly once, every request
// at the head whose fence the stream has passed; a later request never
// overtakes an earlier one. Execution runs with only this queue's execution
// lock held (never the registry's or a mechanism's), so an allocator callback
// may re-enter the registry or enqueue more work.
//
// Each request travels with a pin on the provider context, released only after
// it settles, so the context's teardown observes queued work. pin_context()
// is refused once the context stops accepting work: the caller keeps its
// allocation live.
//
// Refusals hand the exact request back, with the first rejection that applies
// of: device-lost, closed, full (a pin for another context is refused).
// mark_device_lost() settles every pending request as device-lost quarantine
// without calling the allocator, and from then on the queue holds no pin.
// Destroying the queue abandons what is still pending: each request
// quarantines itself (abandoned-request); nothing is freed and nothing waits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <atomic>
#include <memory>
#include <optional>

#include "ortmem/deferred.hpp"
#include "ortmem/detail/reusable_fifo.hpp"
#include "ortmem/detail/spin_lock.hpp"
#include "ortmem/host/host_stream.hpp"

namespace ortmem::host {

class HostDeferredReleaseQueue final : public DeferredReleaseQueue {
 public:
  struct Options {
    // Unbounded when empty.
    std::optional<std::size_t> capacity;
  };

  HostDeferredReleaseQueue(std::shared_ptr<ProviderContextPinSource> context, std::shared_ptr<HostStream> stream,
                           Options options = {});
  ~HostDeferredReleaseQueue() override;
  HostDeferredReleaseQueue(const HostDeferredReleaseQueue&) = delete;
  HostDeferredReleaseQueue& operator=(const HostDeferredReleaseQueue&) = delete;

  [[nodiscard]] Expected<ProviderContextPin, ProviderContextPinError> pin_context() noexcept override;
  [[nodiscard]] Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(
      PreparedAllocationRelease&& request, ProviderContextPin pin) noexcept override;
  [[nodiscard]] std::size_t pending() const noexcept override;

  // Executes every ready request at the head, in order; returns how many ran.
  // A poll that finds another poll executing returns 0 rather than waiting.
  std::size_t poll() noexcept;
  // No new work from now on; pending requests still execute as their fences pass.
  void close() noexcept;
  // Settles everything pending as device-lost, without calling the allocator.
  // Returns how many settled.
  std::size_t mark_device_lost() noexcept;

  [[nodiscard]] std::optional<std::size_t> capacity() const noexcept { return capacity_; }
  [[nodiscard]] const HostStream& stream() const noexcept { return *stream_; }
  // How many requests poll() has executed so far.
  [[nodiscard]] std::size_t executed() const noexcept;

 private:
  struct Entry {
    // Takes the request and pin over (from the caller's lvalues, so enqueue
    // can still hand them back if the entry's storage cannot be allocated).
    Entry(std::uint64_t fence_, PreparedAllocationRelease& request_, ProviderContextPin& pin_) noexcept
        : fence(fence_), request(std::move(request_)), pin(std::move(pin_)) {}
    Entry(Entry&&) noexcept = default;
    Entry& operator=(Entry&&) noexcept = default;

    std::uint64_t fence;
    PreparedAllocationRelease request;
    ProviderContextPin pin;  // released after the request settles
  };

  const std::shared_ptr<ProviderContextPinSource> context_;
  const ProviderContextIdentity context_identity_;  // the one context context_ pins, read once
  const std::shared_ptr<HostStream> stream_;
  const std::optional<std::size_t> capacity_;

  // Guards the entries and flags; held only for bookkeeping, never while a
  // request executes.
  mutable detail::SpinLock mutex_;
  detail::ReusableFifo<Entry> entries_;
  bool closed_ = false;
  bool device_lost_ = false;
  // Raised after each request settled and its pin went, only by the
  // executing poller; read without any lock.
  std::atomic<std::size_t> executed_{0};
  // True while one poller executes requests, so two pollers cannot reorder the
  // FIFO. Read and set only under mutex_; cleared by that poller once done,
  // with or without the lock. A second poller returns at once, never waits.
  std::atomic<bool> executing_{false};
};

}  // namespace ortmem::host
