#include "adapters/plugin/plugin_queue.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace ortmem::adapters {

// The queue itself. The completion callbacks the plugin allocators hold
// see it weakly: like any queue it owns the requests it took, and destroying
// it before the plugin completes them abandons them (quarantine), while a
// completion that arrives later settles nothing.
class PluginQueue::Sink final : public DeferredReleaseQueue {
 public:
  Sink(std::shared_ptr<ProviderContextPinSource> pins, AllocatorLookup lookup)
      : pins_(std::move(pins)), lookup_(std::move(lookup)) {}

  Expected<ProviderContextPin, ProviderContextPinError> pin_context() noexcept override { return pins_->pin(); }

  Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(PreparedAllocationRelease&& request,
                                                           ProviderContextPin pin) noexcept override {
    void* const ptr = request.data();
    const std::size_t bytes = request.size();
    const std::size_t align = request.alignment();
    std::shared_ptr<plugin::PluginAllocator> allocator = lookup_(ptr, bytes, align);
    if (allocator == nullptr || !allocator->releases_deferred()) {
      return fail(DeferredEnqueueError(DeferredEnqueueRejection::kRefused, std::move(request)));
    }
    std::uint64_t serial = 0;
    {
      // In before the plugin is called: it may complete inside the call.
      const std::lock_guard lock(mutex_);
      serial = ++serial_;
      waiting_.emplace(serial, Waiting{std::move(request), std::move(pin), allocator});
      allocators_.insert(allocator);
    }
    auto queued = allocator->enqueue_release(ptr, bytes, align,
                                             [weak = self_, serial](AllocationReleaseOutcome outcome) {
                                               if (auto self = weak.lock()) self->settle(serial, std::move(outcome));
                                             });
    bury();
    if (queued) return DeferredEnqueued{};
    std::optional<PreparedAllocationRelease> back;
    {
      const std::lock_guard lock(mutex_);
      auto node = waiting_.extract(serial);
      if (!node.empty()) back.emplace(std::move(node.mapped().request));
    }
    // enqueue_release refuses only what it left live, so the request is still here.
    return fail(DeferredEnqueueError(DeferredEnqueueRejection::kRefused, std::move(*back)));
  }

  std::size_t pending() const noexcept override {
    const std::lock_guard lock(mutex_);
    return waiting_.size();
  }

  std::size_t drain() {
    // A plugin may complete on its own threads: retire what it can now, then
    // give its workers a bounded time for the rest (an honest one needs
    // microseconds; a completion missing after two seconds is not coming).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (;;) {
      std::vector<std::shared_ptr<plugin::PluginAllocator>> holding;
      {
        const std::lock_guard lock(mutex_);
        for (const auto& [serial, waiting] : waiting_) {
          if (auto allocator = waiting.allocator.lock()) holding.push_back(std::move(allocator));
        }
      }
      if (holding.empty() || std::chrono::steady_clock::now() > deadline) break;
      for (const auto& allocator : std::set(holding.begin(), holding.end())) (void)allocator->drain_releases();
      if (pending() == 0) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    bury();
    const std::lock_guard lock(mutex_);
    return std::exchange(settled_since_drain_, 0);
  }

  Settlements settlements() const {
    Settlements made;
    std::vector<std::shared_ptr<plugin::PluginAllocator>> seen;
    {
      const std::lock_guard lock(mutex_);
      made.order = order_;
      made.completed = completed_;
      for (const auto& weak : allocators_) {
        if (auto allocator = weak.lock()) seen.push_back(std::move(allocator));
      }
    }
    for (const auto& allocator : seen) {
      for (std::string& violation : allocator->completion_violations()) made.violations.push_back(std::move(violation));
    }
    return made;
  }

  void set_self(const std::shared_ptr<Sink>& self) { self_ = self; }

 private:
  struct Waiting {
    PreparedAllocationRelease request;
    ProviderContextPin pin;  // travels with the request until it settles (DQ-009)
    std::weak_ptr<plugin::PluginAllocator> allocator;  // the request itself holds it, through its mechanism
  };

  void settle(std::uint64_t serial, AllocationReleaseOutcome outcome) {
    std::optional<Waiting> done;
    {
      const std::lock_guard lock(mutex_);
      auto node = waiting_.extract(serial);
      if (node.empty()) return;  // the desk matched it once; it cannot come twice
      order_.push_back(node.mapped().request.data());
      if (outcome.is_complete()) completed_.push_back({node.mapped().request.size(), outcome.accounting()->allocation_bytes});
      ++settled_since_drain_;
      done.emplace(std::move(node.mapped()));
    }
    // No lock held: settling records the outcome in the registry's mechanism.
    (void)std::move(done->request).settle(std::move(outcome));
    // What the request held (its mechanism, the plugin allocator) may be the
    // last reference to the allocator, whose final release must not run on
    // the plugin's own thread inside its callback (a worker would join
    // itself): it is dropped later, on a kit thread.
    const std::lock_guard lock(mutex_);
    retired_.push_back(std::move(*done));
  }

 public:
  // Drops what settled requests held; called on kit threads only.
  void bury() {
    std::vector<Waiting> retired;
    {
      const std::lock_guard lock(mutex_);
      retired.swap(retired_);
    }
  }

 private:

  std::shared_ptr<ProviderContextPinSource> pins_;
  AllocatorLookup lookup_;
  std::weak_ptr<Sink> self_;
  mutable std::mutex mutex_;
  std::uint64_t serial_ = 0;                                     // guarded by mutex_
  std::map<std::uint64_t, Waiting> waiting_;                     // guarded by mutex_
  std::vector<void*> order_;                                     // guarded by mutex_
  std::vector<Settlements::Completed> completed_;                // guarded by mutex_
  std::size_t settled_since_drain_ = 0;                          // guarded by mutex_
  std::vector<Waiting> retired_;                                 // guarded by mutex_
  std::set<std::weak_ptr<plugin::PluginAllocator>, std::owner_less<>> allocators_;  // guarded by mutex_
};

PluginQueue::PluginQueue(std::shared_ptr<ProviderContextPinSource> pins, AllocatorLookup lookup)
    : sink_(std::make_shared<Sink>(std::move(pins), std::move(lookup))) {
  sink_->set_self(sink_);
}

PluginQueue::~PluginQueue() { sink_->bury(); }

DeferredReleaseQueue& PluginQueue::queue() { return *sink_; }

std::size_t PluginQueue::drain() { return sink_->drain(); }

std::optional<cts::QueueUnderTest::Settlements> PluginQueue::settled_itself() const { return sink_->settlements(); }

namespace {
[[noreturn]] void not_offered(const char* control) {
  std::fprintf(stderr,
               "ortmem-cts: a suite called %s on an nxmem plugin's queue, a control the ABI does not offer; the "
               "suite must end with ORTMEM_CTS_REQUIRE_CONTROL first (a kit bug)\n",
               control);
  std::abort();
}
}  // namespace

void PluginQueue::close() { not_offered("close()"); }
void PluginQueue::mark_device_lost() { not_offered("mark_device_lost()"); }

}  // namespace ortmem::adapters
