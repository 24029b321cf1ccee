// adapters/plugin/plugin_queue.hpp: a plugin's deferred release, as the
// deferred release queue the suites certify.
//
// The nxmem ABI puts the queue in the allocator: enqueue_release hands an
// allocation to the plugin, which frees it itself, on its own schedule, and
// reports the outcome through release_completed. The bridge does the host's
// part and no more: it pins the context (pins are the host's side of the
// ABI), hands the request's allocation to the plugin allocator that holds it,
// keeps the request and its pin until the completion arrives, and then
// settles the request with what the plugin reported
// (PreparedAllocationRelease::settle), on whichever thread delivered it.
//
// The ABI alone gives the kit no say over when a plugin completes, no
// bound, no close and no device loss. Without the control extension this
// queue offers none of them: record_use and signal_fences change nothing,
// capacity() is unbounded, calling close or mark_device_lost is a kit bug (a
// suite that forgot ORTMEM_CTS_REQUIRE_CONTROL) that aborts the one test,
// and drain() asks every plugin allocator with a release outstanding to
// retire what it can, then waits a bounded time (2 s) for the completions
// the plugin's own threads deliver.
//
// With the extension (ortmem_cts_controls.h) each control the plugin offers
// is the plugin's, never imitated here: the queue starts the queue of every
// allocator it hands a release to (open_queue, with the capacity asked),
// brings it up to what this queue has been told so far (outstanding device
// work, closed, lost), and forwards every later control to each allocator
// it started. A refusal is read from the plugin's status (DEVICE_ERROR
// lost, UNSUPPORTED_CAPABILITY closed, BUSY full), and a completion the
// plugin made for a lost device settles as a device-lost quarantine only
// once this queue was told of the loss. A queue the kit opened retires
// tickets only inside the kit's calls, so what the suites read between two
// calls holds still; and with fences a drain waits for nothing, since
// drain_releases returns once every passed ticket is complete.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>

#include "plugin/plugin_allocator.hpp"
#include "plugin/plugin_controls.hpp"
#include "ortmem/cts/adapter.hpp"

namespace ortmem::adapters {

class PluginQueue final : public cts::QueueUnderTest {
 public:
  // The plugin allocator holding (ptr, bytes, align), or null.
  using AllocatorLookup = std::function<std::shared_ptr<plugin::PluginAllocator>(void*, std::size_t, std::size_t)>;

  // `controls`: the mechanism's control extension, if it offers one;
  // `capacity`: the bound asked for, kept only when the plugin offers
  // QUEUE_CAPACITY.
  PluginQueue(std::shared_ptr<ProviderContextPinSource> pins, AllocatorLookup lookup,
              std::optional<plugin::Controls> controls, std::optional<std::size_t> capacity);
  ~PluginQueue() override;

  DeferredReleaseQueue& queue() override;
  void record_use() override;
  void signal_fences() override;
  std::size_t drain() override;
  void close() override;
  void mark_device_lost() override;
  std::optional<std::size_t> capacity() const override;
  std::optional<Settlements> settled_itself() const override;

 private:
  class Sink;
  std::shared_ptr<Sink> sink_;
};

}  // namespace ortmem::adapters
