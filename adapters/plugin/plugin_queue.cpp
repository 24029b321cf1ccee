#include "plugin/plugin_queue.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace ortmem::adapters {
namespace {

[[noreturn]] void not_offered(const char* control) {
  std::fprintf(stderr,
               "ortmem-cts: a suite called %s on an nxmem plugin's queue, a control the plugin does not offer; the "
               "suite must end with ORTMEM_CTS_REQUIRE_CONTROL first (a kit bug)\n",
               control);
  std::abort();
}

// A control the plugin offers and then refuses leaves the test without the
// state it set up: crashing costs that one test (in an isolated child) and
// names the slot, where carrying on would judge the queue on a state it
// never reached.
void require(const plugin::PluginStatus& answer, const char* slot) {
  if (answer.ok()) return;
  std::fprintf(stderr, "ortmem-cts: the plugin offers %s in its control extension, and %s answered %s\n", slot, slot,
               answer.describe().c_str());
  std::abort();
}

DeferredEnqueueRejection rejection_of(std::uint32_t code) noexcept {
  switch (code) {
    case NXMEM_STATUS_DEVICE_ERROR: return DeferredEnqueueRejection::kDeviceLost;
    case NXMEM_STATUS_UNSUPPORTED_CAPABILITY: return DeferredEnqueueRejection::kClosed;
    case NXMEM_STATUS_BUSY: return DeferredEnqueueRejection::kFull;
    default: return DeferredEnqueueRejection::kRefused;
  }
}

}  // namespace

// The queue itself. The completion callbacks the plugin allocators hold
// see it weakly: like any queue it owns the requests it took, and destroying
// it before the plugin completes them abandons them (quarantine), while a
// completion that arrives later settles nothing.
class PluginQueue::Sink final : public DeferredReleaseQueue {
 public:
  Sink(std::shared_ptr<ProviderContextPinSource> pins, AllocatorLookup lookup, std::optional<plugin::Controls> controls,
       std::optional<std::size_t> capacity)
      : pins_(std::move(pins)), lookup_(std::move(lookup)), controls_(controls), capacity_(capacity) {}

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
    // A request kept on a pin that is no claim on this queue's context would
    // wait where that context's teardown cannot see it (DQ-009), so it waits
    // on a claim of the queue's own. Replaced rather than refused: the
    // plugin's own refusals (device lost, closed, full) must still win (DQ-006).
    if (!pin.holds_claim() || pin.context() != pins_->context()) {
      auto own = pins_->pin();
      if (!own) return fail(DeferredEnqueueError(DeferredEnqueueRejection::kRefused, std::move(request)));
      pin = std::move(*own);
    }
    start(allocator);
    std::uint64_t serial = 0;
    {
      // In before the plugin is called: it may complete inside the call.
      const std::lock_guard lock(mutex_);
      serial = ++serial_;
      waiting_.emplace(serial, Waiting{std::move(request), std::move(pin), allocator});
      allocators_.insert(allocator);
    }
    auto queued = allocator->enqueue_release(
        ptr, bytes, align, [weak = self_, serial](AllocationReleaseOutcome outcome, bool by_device_loss) {
          if (auto self = weak.lock()) self->settle(serial, std::move(outcome), by_device_loss);
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
    return fail(DeferredEnqueueError(rejection_of(queued.error().code), std::move(*back)));
  }

  std::size_t pending() const noexcept override {
    const std::lock_guard lock(mutex_);
    return waiting_.size();
  }

  std::size_t drain() {
    if (offers(ORTMEM_CTS_CONTROL_FENCES)) {
      // drain_releases returns once every passed ticket is complete: what
      // is still waiting afterwards is behind a fence.
      for (const auto& allocator : holding()) (void)allocator->drain_releases();
    } else {
      // A plugin may complete on its own threads: retire what it can now,
      // then give its workers a bounded time for the rest (an honest one
      // needs microseconds; a completion missing after two seconds is not
      // coming).
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      for (;;) {
        const auto allocators = holding();
        if (allocators.empty() || std::chrono::steady_clock::now() > deadline) break;
        for (const auto& allocator : allocators) (void)allocator->drain_releases();
        if (pending() == 0) break;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    bury();
    const std::lock_guard lock(mutex_);
    return std::exchange(settled_since_drain_, 0);
  }

  // The controls: each is remembered for allocators started later, and
  // forwarded to every allocator started so far.
  // Without fences there is no device work to wait for: recording and
  // signalling it are nothing, as for any queue whose fences always pass.
  void record_use() {
    if (offers(ORTMEM_CTS_CONTROL_FENCES))
      control(ORTMEM_CTS_CONTROL_FENCES, "record_use()", [&] { use_outstanding_ = true; });
  }
  void signal_fences() {
    if (offers(ORTMEM_CTS_CONTROL_FENCES))
      control(ORTMEM_CTS_CONTROL_FENCES, "signal_fences()", [&] { use_outstanding_ = false; });
  }
  void close() {
    control(ORTMEM_CTS_CONTROL_QUEUE_CLOSE, "close()", [&] { closed_ = true; });
  }
  void mark_device_lost() {
    control(ORTMEM_CTS_CONTROL_QUEUE_DEVICE_LOSS, "mark_device_lost()", [&] { losing_.store(true); });
    told_lost_.store(true);
    bury();
  }

  [[nodiscard]] std::optional<std::size_t> capacity() const {
    return offers(ORTMEM_CTS_CONTROL_QUEUE_CAPACITY) ? capacity_ : std::nullopt;
  }

  Settlements settlements() const {
    Settlements made;
    std::vector<std::shared_ptr<plugin::PluginAllocator>> seen;
    {
      const std::lock_guard lock(mutex_);
      made.order = order_;
      made.after_loss = after_loss_;
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

  // Drops what settled requests held; called on kit threads only.
  void bury() {
    std::vector<Waiting> retired;
    {
      const std::lock_guard lock(mutex_);
      retired.swap(retired_);
    }
  }

 private:
  struct Waiting {
    PreparedAllocationRelease request;
    ProviderContextPin pin;                            // travels with the request until it settles (DQ-009)
    std::weak_ptr<plugin::PluginAllocator> allocator;  // the request itself holds it, through its mechanism
  };
  using Started = std::vector<std::weak_ptr<plugin::PluginAllocator>>;

  [[nodiscard]] bool offers(std::uint64_t control) const { return controls_ && controls_->offers(control); }

  // The plugin allocators holding a request of this queue.
  [[nodiscard]] std::set<std::shared_ptr<plugin::PluginAllocator>> holding() const {
    std::set<std::shared_ptr<plugin::PluginAllocator>> found;
    const std::lock_guard lock(mutex_);
    for (const auto& [serial, waiting] : waiting_) {
      if (auto allocator = waiting.allocator.lock()) found.insert(std::move(allocator));
    }
    return found;
  }

  // Starts `allocator`'s queue as this one, the first time this queue hands
  // it a release: open, with this queue's bound, then told what this queue
  // has been told so far. control_mutex_ orders it against the controls, so
  // an allocator is never started halfway through one.
  void start(const std::shared_ptr<plugin::PluginAllocator>& allocator) {
    if (!controls_ || !controls_->offers_queue_controls()) return;
    const std::lock_guard lock(control_mutex_);
    for (const auto& weak : started_) {
      if (weak.lock() == allocator) return;
    }
    void* const ctx = allocator->plugin_ctx();
    require(controls_->open_queue(ctx, capacity().value_or(0)), "open_queue");
    if (use_outstanding_) require(controls_->record_use(ctx), "record_use");
    if (closed_) require(controls_->close_queue(ctx), "close_queue");
    if (losing_.load()) require(controls_->lose_device(ctx), "lose_device");
    std::erase_if(started_, [](const auto& weak) { return weak.expired(); });
    started_.push_back(allocator);
  }

  template <typename Remember>
  void control(std::uint64_t bit, const char* name, Remember remember) {
    if (!offers(bit)) not_offered(name);
    const std::lock_guard lock(control_mutex_);
    remember();
    for (const auto& weak : started_) {
      auto allocator = weak.lock();
      if (allocator == nullptr) continue;
      void* const ctx = allocator->plugin_ctx();
      // Completions a lost device settles arrive inside lose_device, and
      // settle() takes mutex_ only, never control_mutex_.
      switch (bit) {
        case ORTMEM_CTS_CONTROL_FENCES:
          require(use_outstanding_ ? controls_->record_use(ctx) : controls_->signal_fences(ctx),
                  use_outstanding_ ? "record_use" : "signal_fences");
          break;
        case ORTMEM_CTS_CONTROL_QUEUE_CLOSE: require(controls_->close_queue(ctx), "close_queue"); break;
        default: require(controls_->lose_device(ctx), "lose_device"); break;
      }
    }
  }

  void settle(std::uint64_t serial, AllocationReleaseOutcome outcome, bool by_device_loss) {
    std::optional<Waiting> done;
    bool device_lost = false;
    {
      const std::lock_guard lock(mutex_);
      auto node = waiting_.extract(serial);
      if (node.empty()) return;  // the desk matched it once; it cannot come twice
      device_lost = by_device_loss && losing_.load();
      if (!device_lost) {
        order_.push_back(node.mapped().request.data());
        after_loss_.push_back(told_lost_.load());
      }
      if (outcome.is_complete())
        completed_.push_back({node.mapped().request.size(), outcome.accounting()->allocation_bytes});
      ++settled_since_drain_;
      done.emplace(std::move(node.mapped()));
    }
    // No lock held: settling records the outcome in the registry's
    // mechanism. A ticket the plugin settled for a lost device is the
    // device-lost quarantine the contract names (DQ-012), once this queue
    // was told of the loss; any other report is recorded as it was made.
    if (device_lost) {
      (void)std::move(done->request).quarantine_device_lost();
    } else {
      (void)std::move(done->request).settle(std::move(outcome));
    }
    // What the request held (its mechanism, the plugin allocator) may be the
    // last reference to the allocator, whose final release must not run on
    // the plugin's own thread inside its callback (a worker would join
    // itself): it is dropped later, on a kit thread.
    const std::lock_guard lock(mutex_);
    retired_.push_back(std::move(*done));
  }

  std::shared_ptr<ProviderContextPinSource> pins_;
  AllocatorLookup lookup_;
  std::optional<plugin::Controls> controls_;
  std::optional<std::size_t> capacity_;
  std::weak_ptr<Sink> self_;

  std::mutex control_mutex_;      // orders the controls and the start of each allocator's queue
  Started started_;               // guarded by control_mutex_
  bool use_outstanding_ = false;  // guarded by control_mutex_
  bool closed_ = false;           // guarded by control_mutex_
  // Read by settle(), on the plugin's threads too. losing_: lose_device has
  // been (or is being) called, so a device-loss completion is read as one;
  // told_lost_: it returned, so a release performed from now on is one the
  // plugin made after it was told (one in flight while it was told is not).
  std::atomic<bool> losing_{false};
  std::atomic<bool> told_lost_{false};

  mutable std::mutex mutex_;
  std::uint64_t serial_ = 0;                       // guarded by mutex_
  std::map<std::uint64_t, Waiting> waiting_;       // guarded by mutex_
  std::vector<void*> order_;                       // guarded by mutex_
  std::vector<bool> after_loss_;                   // guarded by mutex_; one per order_ entry
  std::vector<Settlements::Completed> completed_;  // guarded by mutex_
  std::size_t settled_since_drain_ = 0;            // guarded by mutex_
  std::vector<Waiting> retired_;                   // guarded by mutex_
  std::set<std::weak_ptr<plugin::PluginAllocator>, std::owner_less<>> allocators_;  // guarded by mutex_
};

PluginQueue::PluginQueue(std::shared_ptr<ProviderContextPinSource> pins, AllocatorLookup lookup,
                         std::optional<plugin::Controls> controls, std::optional<std::size_t> capacity)
    : sink_(std::make_shared<Sink>(std::move(pins), std::move(lookup), controls, capacity)) {
  sink_->set_self(sink_);
}

PluginQueue::~PluginQueue() { sink_->bury(); }

DeferredReleaseQueue& PluginQueue::queue() { return *sink_; }
void PluginQueue::record_use() { sink_->record_use(); }
void PluginQueue::signal_fences() { sink_->signal_fences(); }
std::size_t PluginQueue::drain() { return sink_->drain(); }
void PluginQueue::close() { sink_->close(); }
void PluginQueue::mark_device_lost() { sink_->mark_device_lost(); }
std::optional<std::size_t> PluginQueue::capacity() const { return sink_->capacity(); }
std::optional<cts::QueueUnderTest::Settlements> PluginQueue::settled_itself() const { return sink_->settlements(); }

}  // namespace ortmem::adapters
