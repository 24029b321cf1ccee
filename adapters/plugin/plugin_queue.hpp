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
// The ABI gives the kit no say over when a plugin completes, no bound, no
// close and no device loss, so this queue offers none of those controls:
// record_use and signal_fences change nothing, capacity() is unbounded, and
// calling close or mark_device_lost is a kit bug (a suite that forgot
// ORTMEM_CTS_REQUIRE_CONTROL) that aborts the one test. drain() asks every
// plugin allocator with a release outstanding to retire what it can, and
// waits a bounded time (2 s) for the completions the plugin's own threads deliver.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>

#include "adapters/plugin/plugin_allocator.hpp"
#include "ortmem/cts/adapter.hpp"

namespace ortmem::adapters {

class PluginQueue final : public cts::QueueUnderTest {
 public:
  // The plugin allocator holding (ptr, bytes, align), or null.
  using AllocatorLookup = std::function<std::shared_ptr<plugin::PluginAllocator>(void*, std::size_t, std::size_t)>;

  PluginQueue(std::shared_ptr<ProviderContextPinSource> pins, AllocatorLookup lookup);
  ~PluginQueue() override;

  DeferredReleaseQueue& queue() override;
  void record_use() override {}
  void signal_fences() override {}
  std::size_t drain() override;
  [[noreturn]] void close() override;
  [[noreturn]] void mark_device_lost() override;
  std::optional<std::size_t> capacity() const override { return std::nullopt; }
  std::optional<Settlements> settled_itself() const override;

 private:
  class Sink;
  std::shared_ptr<Sink> sink_;
};

}  // namespace ortmem::adapters
