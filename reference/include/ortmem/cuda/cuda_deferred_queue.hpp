// ortmem/cuda/cuda_deferred_queue.hpp: the reference event-fenced deferred
// release queue of a CUDA provider context.
//
// enqueue() records a fence on the stream that used the memory (an event)
// and never blocks; a request whose fence cannot be recorded is handed back,
// refused. poll() queries fences, never waiting and never synchronizing the
// device, and executes in FIFO order, exactly once, every request at the
// head whose fence has passed; a later request never overtakes an earlier
// one. Execution holds only this queue's execution lock, so an allocator
// callback may re-enter the registry or enqueue more work.
//
// Each request travels with a pin on the provider context, released only
// after it settles, so the context's teardown observes queued work.
//
// Device loss (mark_device_lost(), or a fence the device reports broken)
// settles every pending request as device-lost quarantine without calling
// the allocator or the driver; from then on the queue refuses work with
// device-lost. Refusals otherwise report the first that applies of closed,
// full, refused. Destroying the queue abandons what is pending: each request
// quarantines itself; nothing is freed and nothing waits.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

#include "ortmem/cuda/stream_fences.hpp"
#include "ortmem/deferred.hpp"
#include "ortmem/detail/reusable_fifo.hpp"
#include "ortmem/detail/spin_lock.hpp"

namespace ortmem::cuda {

class CudaDeferredReleaseQueue final : public DeferredReleaseQueue {
 public:
  struct Options {
    std::optional<std::size_t> capacity;  // unbounded when empty
  };

  CudaDeferredReleaseQueue(std::shared_ptr<ProviderContextPinSource> context, std::shared_ptr<StreamFences> fences,
                           Options options = {});
  ~CudaDeferredReleaseQueue() override;
  CudaDeferredReleaseQueue(const CudaDeferredReleaseQueue&) = delete;
  CudaDeferredReleaseQueue& operator=(const CudaDeferredReleaseQueue&) = delete;

  [[nodiscard]] Expected<ProviderContextPin, ProviderContextPinError> pin_context() noexcept override;
  [[nodiscard]] Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(
      PreparedAllocationRelease&& request, ProviderContextPin pin) noexcept override;
  [[nodiscard]] std::size_t pending() const noexcept override;

  // Executes every request at the head whose fence passed; returns how many ran.
  // A poll that finds another poll executing returns 0 rather than waiting.
  std::size_t poll() noexcept;
  void close() noexcept;
  // Settles everything pending as device-lost, touching neither allocator nor driver.
  std::size_t mark_device_lost() noexcept;
  [[nodiscard]] std::optional<std::size_t> capacity() const noexcept { return capacity_; }

 private:
  struct Entry {
    FenceToken fence;
    PreparedAllocationRelease request;
    ProviderContextPin pin;  // released after the request settles
  };

  const std::shared_ptr<ProviderContextPinSource> context_;
  const std::shared_ptr<StreamFences> fences_;
  const std::optional<std::size_t> capacity_;

  // Guards the entries and flags; never held while a request executes or a
  // fence is recorded or queried.
  mutable detail::SpinLock mutex_;
  detail::ReusableFifo<Entry> entries_;
  bool closed_ = false;
  bool device_lost_ = false;
  // Held while requests execute, so two pollers cannot reorder the FIFO. Only
  // ever tried, never waited for: a second poller returns at once.
  detail::SpinLock executing_;
};

}  // namespace ortmem::cuda
