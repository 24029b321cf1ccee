#include "ortmem/mechanism/provider_context.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "ortmem/detail/thread_slot.hpp"

namespace ortmem::mechanism {

// The pin count is sharded: each thread counts in a shard of its own, so two
// threads pinning one context write no common cache line, and a pin costs one
// atomic add each way, as a single shared counter would. A pin is counted
// where it was taken and uncounted where it is given back, so one shard may
// read negative; only the sum of all shards is a count.
//
// Each shard's word holds its count (times two) and a sealed bit. Whatever
// stops the context accepting work (retirement, device loss, teardown, the
// context object going away) first seals every shard, under the mutex, and
// moves their counts into one total guarded by the mutex. A pin or release
// whose add reached a shard before its seal is in that total; one whose add
// comes after sees the seal in the value its add returns: a pin is refused
// (what it added is never read again), a release counts down the total under
// the mutex. So from the seal on:
//   - the total is exact, and teardown's wait cannot miss its wake-up;
//   - exactly one party sees "no pin and no owner" and frees the counter;
//   - a release that finds the seal still holds its pin in the total until
//     it counts down under the mutex, so nobody frees the counter under it,
//     and a release that does not find it touched nothing but its add.
//
// A capped context (max_outstanding_pins below the counter's capacity)
// grants under the mutex, so the cap is exact: only releases change the
// shards while it sums them, which can only lower the sum, so a sum at the
// cap was a count at the cap when the sum began, and one below it still is.
class ProviderContext::Counter final : public PinAnchor {
 public:
  Counter(ProviderContextIdentity identity, std::uint64_t max_pins) noexcept
      : identity_(identity), max_pins_(std::min(max_pins, kCounterCapacity)) {}

  [[nodiscard]] State state() const noexcept { return state_.load(std::memory_order_acquire); }
  [[nodiscard]] ProviderContextIdentity context() const noexcept override { return identity_; }

  Expected<ProviderContextPin, ProviderContextPinError> acquire() noexcept {
    if (max_pins_ < kCounterCapacity) return acquire_capped();
    if (is_sealed(home().word.fetch_add(kOnePin, std::memory_order_acq_rel))) {
      return fail(refusal(ProviderContextPinError::Kind::kContextUnavailable));
    }
    return ProviderContextPin::adopt_counted_claim(*this);
  }

  void release_pin() noexcept override {
    if (!is_sealed(home().word.fetch_sub(kOnePin, std::memory_order_acq_rel))) return;
    bool last_holder = false;
    {
      const std::lock_guard lock(mutex_);
      --sealed_total_;
      last_holder = !owned_ && sealed_total_ == 0;
      drained_.notify_all();
    }
    if (last_holder) delete this;
  }

  void advance_to(State target) noexcept {
    const std::lock_guard lock(mutex_);
    advance_locked(target);
  }

  [[nodiscard]] std::uint64_t outstanding() noexcept {
    const std::lock_guard lock(mutex_);
    if (sealed_) return static_cast<std::uint64_t>(sealed_total_);
    // Exact whenever no pin is taken or given back meanwhile, which is what
    // PIN-009 asks. A sum read during traffic may pair a release with no
    // acquire; it is shown as zero rather than as a negative count.
    return static_cast<std::uint64_t>(std::max<std::int64_t>(unsealed_sum(), 0));
  }

  Expected<void, TeardownBusy> teardown(std::chrono::steady_clock::time_point deadline) noexcept {
    std::unique_lock lock(mutex_);
    advance_locked(State::kRetiring);
    const bool drained = drained_.wait_until(lock, deadline, [&] { return sealed_total_ == 0; });
    if (!drained) return fail(TeardownBusy{identity_, static_cast<std::uint64_t>(sealed_total_)});
    advance_locked(State::kTerminated);
    return {};
  }

  // The context object is going away; free now if no pin is outstanding,
  // otherwise the last pin's release frees.
  void owner_gone() noexcept {
    bool unpinned = false;
    {
      const std::lock_guard lock(mutex_);
      seal_locked();
      owned_ = false;
      unpinned = sealed_total_ == 0;
    }
    if (unpinned) delete this;
  }

 private:
  static constexpr std::int64_t kSealed = 1;
  static constexpr std::int64_t kOnePin = 2;
  static constexpr std::uint32_t kShards = 16;

  struct alignas(64) Shard {
    std::atomic<std::int64_t> word{0};  // pins * kOnePin, plus kSealed once sealed
  };

  ~Counter() = default;

  [[nodiscard]] static bool is_sealed(std::int64_t word) noexcept { return (word & kSealed) != 0; }
  [[nodiscard]] Shard& home() noexcept { return shards_[detail::thread_slot() % kShards]; }
  [[nodiscard]] ProviderContextPinError refusal(ProviderContextPinError::Kind kind) const noexcept {
    return ProviderContextPinError{kind, identity_};
  }

  // Called with mutex_ held.
  void advance_locked(State target) noexcept {
    // Sealed first: whoever reads the new state finds every shard sealed.
    seal_locked();
    // States only move forward: a request for an earlier state is a no-op.
    if (state_.load(std::memory_order_relaxed) < target) state_.store(target, std::memory_order_release);
  }
  void seal_locked() noexcept {
    if (sealed_) return;
    for (Shard& shard : shards_) sealed_total_ += shard.word.fetch_or(kSealed, std::memory_order_acq_rel) / kOnePin;
    sealed_ = true;
  }
  // Called with mutex_ held, before the seal.
  [[nodiscard]] std::int64_t unsealed_sum() const noexcept {
    std::int64_t pins = 0;
    for (const Shard& shard : shards_) pins += shard.word.load(std::memory_order_acquire) / kOnePin;
    return pins;
  }

  Expected<ProviderContextPin, ProviderContextPinError> acquire_capped() noexcept {
    const std::lock_guard lock(mutex_);
    if (sealed_) return fail(refusal(ProviderContextPinError::Kind::kContextUnavailable));
    if (unsealed_sum() >= static_cast<std::int64_t>(max_pins_)) {
      return fail(refusal(ProviderContextPinError::Kind::kPinCountOverflow));
    }
    // No seal can come in between: sealing takes the mutex held here.
    home().word.fetch_add(kOnePin, std::memory_order_acq_rel);
    return ProviderContextPin::adopt_counted_claim(*this);
  }

  const ProviderContextIdentity identity_;
  const std::uint64_t max_pins_;
  std::atomic<State> state_{State::kAccepting};
  std::array<Shard, kShards> shards_;
  // Guards everything below, the seal and every count after it.
  std::mutex mutex_;
  std::condition_variable drained_;
  bool sealed_ = false;
  // The outstanding pins once sealed: the shards' counts at their seal, less
  // every release since.
  std::int64_t sealed_total_ = 0;
  // False once the context object is gone (the shards are sealed by then).
  bool owned_ = true;
};

std::string TeardownBusy::message() const {
  return "teardown of provider context " + to_string(context) + " cannot finish: " + std::to_string(outstanding_pins) +
         " pin(s) are still outstanding; settle or drain the deferred releases holding them, then "
         "retry (and never tear down from a thread that holds one of the context's pins)";
}

ProviderContext::ProviderContext(ProviderContextIdentity identity, Options options)
    : counter_(new Counter(identity, options.max_outstanding_pins)) {}

ProviderContext::~ProviderContext() { counter_->owner_gone(); }

ProviderContextIdentity ProviderContext::context() const noexcept { return counter_->context(); }

Expected<ProviderContextPin, ProviderContextPinError> ProviderContext::pin() noexcept { return counter_->acquire(); }

ProviderContext::State ProviderContext::state() const noexcept { return counter_->state(); }

std::uint64_t ProviderContext::outstanding_pins() const noexcept { return counter_->outstanding(); }

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
