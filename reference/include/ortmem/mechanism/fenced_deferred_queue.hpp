// ortmem/mechanism/fenced_deferred_queue.hpp: the reference deferred release
// queue, over any StreamFences: the host queue (fences on a HostStream) and
// the CUDA one (events, CudaEventFences) are this one queue.
//
// One queue per provider context and stream. enqueue() records a fence on the
// stream that used the memory (the work that may still use it) and never
// blocks; a request whose fence cannot be recorded is handed back, refused.
// poll() queries fences, never waiting and never synchronizing a device, and
// executes in FIFO order, exactly once, every request at the head whose fence
// has passed; a later request never overtakes an earlier one. Execution holds
// only this queue's execution claim (never the registry's or a mechanism's
// lock), so an allocator callback may re-enter the registry or enqueue more
// work.
//
// Each request travels with a pin on the provider context, released only
// after it settles, so the context's teardown observes queued work.
// pin_context() is refused once the context stops accepting work: the caller
// keeps its allocation live.
//
// Refusals hand the exact request back, with the first rejection that applies
// of: device-lost, closed, full, refused (a pin or request of another
// context, a fence that could not be recorded, no memory for the entry).
// Device loss (mark_device_lost(), or a fence the device reports broken)
// settles every pending request as device-lost quarantine without calling the
// allocator, and without handing a fence back (that would be a driver call on
// a lost device); from then on the queue holds no pin. Destroying the queue
// abandons what is pending: each request quarantines itself (abandoned
// request) and its fence goes back; nothing is freed and nothing waits.
//
// Example:
//   auto stream = std::make_shared<HostStream>();
//   FencedDeferredQueue queue(context, stream);
//   (void)stream->submit();                  // work that uses the memory
//   auto queued = std::move(owner).release_deferred(queue);
//   stream->complete_all();
//   queue.poll();                            // the allocator frees it now
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

#include "ortmem/deferred.hpp"
#include "ortmem/mechanism/stream_fences.hpp"

namespace ortmem::mechanism {

class FencedDeferredQueue final : public DeferredReleaseQueue {
 public:
  struct Options {
    std::optional<std::size_t> capacity;  // unbounded when empty
  };

  FencedDeferredQueue(std::shared_ptr<ProviderContextPinSource> context, std::shared_ptr<StreamFences> fences,
                      Options options = {});
  ~FencedDeferredQueue() override;
  FencedDeferredQueue(const FencedDeferredQueue&) = delete;
  FencedDeferredQueue& operator=(const FencedDeferredQueue&) = delete;

  [[nodiscard]] Expected<ProviderContextPin, ProviderContextPinError> pin_context() noexcept override;
  [[nodiscard]] Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(PreparedAllocationRelease&& request,
                                                                         ProviderContextPin pin) noexcept override;
  [[nodiscard]] std::size_t pending() const noexcept override;

  // Executes every request at the head whose fence passed, in order; returns
  // how many ran. A poll that finds another poll executing returns 0 rather
  // than waiting.
  std::size_t poll() noexcept;
  // No new work from now on; pending requests still execute as their fences pass.
  void close() noexcept;
  // Settles everything pending as device-lost, touching neither the
  // allocator nor the fences. Returns how many settled.
  std::size_t mark_device_lost() noexcept;

  [[nodiscard]] std::optional<std::size_t> capacity() const noexcept;
  // How many requests poll() has executed so far.
  [[nodiscard]] std::size_t executed() const noexcept;

 private:
  class Impl;
  const std::unique_ptr<Impl> impl_;
};

}  // namespace ortmem::mechanism
