#include "ortmem/mechanism/provider_context.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>

namespace ortmem::mechanism {

// The state word: bits 62-63 the State, bit 61 "the context object still
// exists", bits 0-60 the outstanding pin count. Keeping all three in one word
// makes every decision (grant, refuse, free) a single atomic step.
class ProviderContext::Counter final : public PinAnchor {
 public:
  static constexpr std::uint64_t kCountMask = kCounterCapacity;
  static constexpr std::uint64_t kOwnerBit = std::uint64_t{1} << 61;
  static constexpr int kStateShift = 62;

  Counter(ProviderContextIdentity identity, std::uint64_t max_pins) noexcept
      : identity_(identity), max_pins_(std::min(max_pins, kCounterCapacity)) {}

  [[nodiscard]] static State state_of(std::uint64_t word) noexcept { return static_cast<State>(word >> kStateShift); }
  [[nodiscard]] static std::uint64_t count_of(std::uint64_t word) noexcept { return word & kCountMask; }
  [[nodiscard]] std::uint64_t load() const noexcept { return word_.load(std::memory_order_acquire); }

  [[nodiscard]] ProviderContextIdentity context() const noexcept override { return identity_; }

  Expected<ProviderContextPin, ProviderContextPinError> acquire() noexcept {
    std::uint64_t word = word_.load(std::memory_order_relaxed);
    do {
      if (state_of(word) != State::kAccepting) {
        return fail(ProviderContextPinError{ProviderContextPinError::Kind::kContextUnavailable, identity_});
      }
      if (count_of(word) >= max_pins_) {
        return fail(ProviderContextPinError{ProviderContextPinError::Kind::kPinCountOverflow, identity_});
      }
    } while (!word_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_relaxed));
    return ProviderContextPin::adopt_counted_claim(*this);
  }

  void release_pin() noexcept override {
    std::uint64_t word = word_.load(std::memory_order_relaxed);
    do {
      // The last pin of a context that is being torn down must wake the
      // waiter. Doing that decrement under the waiter's mutex is what
      // prevents a lost wake-up between its check and its wait.
      if (count_of(word) == 1 && state_of(word) != State::kAccepting) {
        release_last_pin_and_notify();
        return;
      }
    } while (!word_.compare_exchange_weak(word, word - 1, std::memory_order_acq_rel, std::memory_order_relaxed));
    if (is_unowned_and_unpinned(word - 1)) delete this;
  }

  void advance_to(State target) noexcept {
    std::uint64_t word = word_.load(std::memory_order_relaxed);
    // States only move forward: a request for an earlier state is a no-op.
    while (state_of(word) < target &&
           !word_.compare_exchange_weak(
               word, (word & ~(std::uint64_t{3} << kStateShift)) | (static_cast<std::uint64_t>(target) << kStateShift),
               std::memory_order_acq_rel, std::memory_order_relaxed)) {
    }
  }

  Expected<void, TeardownBusy> teardown(std::chrono::steady_clock::time_point deadline) noexcept {
    advance_to(State::kRetiring);
    std::unique_lock lock(mutex_);
    const bool drained = drained_.wait_until(lock, deadline, [&] { return count_of(load()) == 0; });
    if (!drained) return fail(TeardownBusy{identity_, count_of(load())});
    advance_to(State::kTerminated);
    return {};
  }

  // The context object is going away; free now if no pin is outstanding,
  // otherwise the last pin's release frees.
  void owner_gone() noexcept {
    std::uint64_t previous;
    {
      const std::lock_guard lock(mutex_);  // serialises with release_last_pin_and_notify
      previous = word_.fetch_and(~kOwnerBit, std::memory_order_acq_rel);
    }
    if (count_of(previous) == 0) delete this;
  }

  // Nobody can reach the counter any more: the context object is gone and no pin is left.
  [[nodiscard]] static bool is_unowned_and_unpinned(std::uint64_t word) noexcept {
    return count_of(word) == 0 && (word & kOwnerBit) == 0;
  }

  void mark_owned() noexcept { word_.fetch_or(kOwnerBit, std::memory_order_relaxed); }

 private:
  ~Counter() = default;

  void release_last_pin_and_notify() noexcept {
    bool last_holder;
    {
      const std::lock_guard lock(mutex_);
      last_holder = is_unowned_and_unpinned(word_.fetch_sub(1, std::memory_order_acq_rel) - 1);
      drained_.notify_all();
    }
    if (last_holder) delete this;
  }

  const ProviderContextIdentity identity_;
  const std::uint64_t max_pins_;
  std::atomic<std::uint64_t> word_{0};
  std::mutex mutex_;
  std::condition_variable drained_;
};

std::string TeardownBusy::message() const {
  return "teardown of provider context " + to_string(context) + " cannot finish: " + std::to_string(outstanding_pins) +
         " pin(s) are still outstanding; settle or drain the deferred releases holding them, then "
         "retry (and never tear down from a thread that holds one of the context's pins)";
}

ProviderContext::ProviderContext(ProviderContextIdentity identity, Options options)
    : counter_(new Counter(identity, options.max_outstanding_pins)) {
  counter_->mark_owned();
}

ProviderContext::~ProviderContext() { counter_->owner_gone(); }

ProviderContextIdentity ProviderContext::context() const noexcept { return counter_->context(); }

Expected<ProviderContextPin, ProviderContextPinError> ProviderContext::pin() noexcept { return counter_->acquire(); }

ProviderContext::State ProviderContext::state() const noexcept { return Counter::state_of(counter_->load()); }

std::uint64_t ProviderContext::outstanding_pins() const noexcept { return Counter::count_of(counter_->load()); }

void ProviderContext::begin_retirement() noexcept { counter_->advance_to(State::kRetiring); }

void ProviderContext::mark_device_lost() noexcept { counter_->advance_to(State::kDeviceLost); }

Expected<void, TeardownBusy> ProviderContext::teardown(std::chrono::steady_clock::time_point deadline) noexcept {
  return counter_->teardown(deadline);
}

std::string_view state_name(ProviderContext::State state) noexcept {
  switch (state) {
    case ProviderContext::State::kAccepting: return "accepting";
    case ProviderContext::State::kRetiring: return "retiring";
    case ProviderContext::State::kDeviceLost: return "device-lost";
    case ProviderContext::State::kTerminated: return "terminated";
  }
  return "unknown";
}

}  // namespace ortmem::mechanism
