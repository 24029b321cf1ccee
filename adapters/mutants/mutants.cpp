// adapters/mutants/mutants.cpp: known-bad adapters, each breaking one rule of
// the contract (or a tight group) on top of the host reference.
//
// They exist to prove the kit can fail: `ctest -R mutant` runs each one and
// requires exit 1 with exactly the requirements of manifest.json failing.
// They are registered only in ortmem-cts-mutants, never in ortmem-cts.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "host/host_variant.hpp"
#include "mutant_allocator.hpp"
#include "ortmem/capability.hpp"
#include "ortmem/cts/adapter_registry.hpp"

namespace ortmem::adapters::mutants {
namespace {

using cts::ContextOptions;
using cts::ContextUnderTest;
using cts::QueueOptions;
using cts::QueueUnderTest;

// ---- Allocator mutants. ----

// Returns addresses one byte past the aligned block.
class Misaligned final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    auto ptr = reference_.allocate(bytes + 1, align);
    if (!ptr || align == 1) return ptr;
    return static_cast<void*>(static_cast<unsigned char*>(*ptr) + 1);
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    void* original = align == 1 ? ptr : static_cast<void*>(static_cast<unsigned char*>(ptr) - 1);
    auto outcome = reference_.release(original, bytes + 1, align);
    return outcome.is_complete() ? AllocationReleaseOutcome::complete(ReleaseAccounting::eager(bytes)) : outcome;
  }
};

// Every other allocation aliases the one before it.
class Overlapping final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    const std::lock_guard lock(mutex_);
    if (last_ != nullptr && last_bytes_ >= bytes && (reinterpret_cast<std::uintptr_t>(last_) % align) == 0 &&
        (count_++ % 2) == 1) {
      ++aliases_[last_];
      return last_;
    }
    auto ptr = reference_.allocate(bytes, align);
    if (ptr) {
      last_ = *ptr;
      last_bytes_ = bytes;
    }
    return ptr;
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    {
      const std::lock_guard lock(mutex_);
      if (auto found = aliases_.find(ptr); found != aliases_.end() && found->second > 0) {
        --found->second;  // the alias "goes away"; the block stays for its first owner
        return AllocationReleaseOutcome::complete(ReleaseAccounting::eager(bytes));
      }
      if (ptr == last_) last_ = nullptr;
    }
    return reference_.release(ptr, bytes, align);
  }

 private:
  std::mutex mutex_;
  void* last_ = nullptr;
  std::size_t last_bytes_ = 0;
  std::size_t count_ = 0;
  std::unordered_map<void*, int> aliases_;
};

// Each allocation flips the first byte of the previous live one.
class Corrupting final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    auto ptr = reference_.allocate(bytes, align);
    const std::lock_guard lock(mutex_);
    if (ptr && previous_ != nullptr && previous_bytes_ > 0) *static_cast<unsigned char*>(previous_) ^= 0xFF;
    if (ptr) {
      previous_ = *ptr;
      previous_bytes_ = bytes;
    }
    return ptr;
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    {
      const std::lock_guard lock(mutex_);
      if (ptr == previous_) previous_ = nullptr;
    }
    return reference_.release(ptr, bytes, align);
  }

 private:
  std::mutex mutex_;
  void* previous_ = nullptr;
  std::size_t previous_bytes_ = 0;
};

// Complete, but with the wrong allocation_bytes.
class WrongAccounting final : public MutantAllocator {
 public:
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    auto outcome = reference_.release(ptr, bytes, align);
    return outcome.is_complete() ? AllocationReleaseOutcome::complete({bytes + 1, 0}) : outcome;
  }
};

// Frees, then reports Failed ("nothing changed") anyway.
class FailedAfterFree final : public MutantAllocator {
 public:
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    auto outcome = reference_.release(ptr, bytes, align);
    return outcome.is_complete() ? AllocationReleaseOutcome::failed("mutant: freed but says unchanged") : outcome;
  }
};

// Releases of blocks of 32 MiB or more report Complete but keep the block (a
// free lost on the large-block path): the memory goes back only when the
// allocator is destroyed. A second release of a kept block is Failed, as it
// would be had the block gone.
class LargeReleaseKeepsBlock final : public MutantAllocator {
 public:
  static constexpr std::size_t kLarge = std::size_t{32} << 20;

  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    auto ptr = reference_.allocate(bytes, align);
    if (ptr && bytes >= kLarge) {
      const std::lock_guard lock(mutex_);
      large_[*ptr] = {bytes, align};
    }
    return ptr;
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    {
      const std::lock_guard lock(mutex_);
      if (kept_.contains(ptr))
        return AllocationReleaseOutcome::failed("mutant: not a live allocation; nothing changed");
      if (const auto found = large_.find(ptr);
          found != large_.end() && found->second.first == bytes && found->second.second == align) {
        large_.erase(found);
        kept_.insert(ptr);
        return AllocationReleaseOutcome::complete(ReleaseAccounting::eager(bytes));
      }
    }
    return reference_.release(ptr, bytes, align);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, std::pair<std::size_t, std::size_t>> large_;
  std::unordered_set<void*> kept_;
};

// Reports Complete for releases that name no live allocation.
class UnknownComplete final : public MutantAllocator {
 public:
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    auto outcome = reference_.release(ptr, bytes, align);
    return outcome.is_failed() ? AllocationReleaseOutcome::complete(ReleaseAccounting::eager(bytes)) : outcome;
  }
};

// Loses the backing allocator's own account of a refusal.
class ReasonlessFailure final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    auto ptr = reference_.allocate(bytes, align);
    if (ptr || ptr.error().kind() != MemoryError::Kind::kAllocationFailed) return ptr;
    return fail(MemoryError::allocation_failed(Tier::kHost, bytes, ""));
  }
};

// Files a backing refusal as the caller's mistake.
class MisfiledFailure final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    auto ptr = reference_.allocate(bytes, align);
    if (ptr || ptr.error().kind() != MemoryError::Kind::kAllocationFailed) return ptr;
    return fail(MemoryError::invalid_request(Tier::kHost, bytes, ptr.error().reason()));
  }
};

// Promises lazy, governed commits with no virtual backing to make them.
class FalseOnDemand final : public MutantAllocator {
 public:
  bool commits_on_demand() const noexcept override { return true; }
};

// A virtual backing that refuses everything, for the discovery mutants.
class RefusingBacking final : public VirtualBacking {
 public:
  static MemoryError refusal() { return MemoryError::invalid_request(Tier::kHost, 0, "mutant: unsupported"); }
  Expected<void*, MemoryError> allocate_committed(std::size_t, std::size_t,
                                                  std::span<const ByteRange>) noexcept override {
    return fail(refusal());
  }
  Expected<void, MemoryError> commit_allocation_range(void*, std::size_t, std::size_t, std::size_t,
                                                      std::size_t) noexcept override {
    return fail(refusal());
  }
  Expected<std::uint64_t, MemoryError> decommit_allocation_range(void*, std::size_t, std::size_t, std::size_t,
                                                                 std::size_t) noexcept override {
    return fail(refusal());
  }
  Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation(std::size_t, std::size_t) const noexcept override {
    return fail(refusal());
  }
  Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation_ranges(
      std::span<const AllocationCommitRange>) const noexcept override {
    return fail(refusal());
  }
  std::size_t allocation_committed_bytes(void*, std::size_t, std::size_t) const noexcept override { return 0; }
};

// Capability discovery flips between present and absent.
class UnstableDiscovery final : public MutantAllocator {
 public:
  VirtualBacking* as_virtual_backing() noexcept override {
    return (calls_.fetch_add(1) % 2) == 1 ? &backing_ : nullptr;
  }

 private:
  std::atomic<int> calls_{0};
  RefusingBacking backing_;
};

// device() moves to another device after a few calls.
class WanderingDevice final : public MutantAllocator {
 public:
  DeviceKey device() const noexcept override {
    return calls_.fetch_add(1) < 2 ? DeviceKey::host() : DeviceKey::device(3);
  }

 private:
  mutable std::atomic<int> calls_{0};
};

// Declares virtual backing but its allocator has none.
class DeclaresMissingCapability final : public RenamedHostAdapter {
 public:
  using RenamedHostAdapter::RenamedHostAdapter;
  cts::AdapterInfo info() const override {
    auto info = RenamedHostAdapter::info();
    info.capabilities.insert(cts::Capability::kVirtualBacking);
    return info;
  }
};

// ---- Pin mutants. ----

// A pin source wrapper; each mutant overrides pin() or context().
class PinSourceWrapper : public ProviderContextPinSource {
 public:
  explicit PinSourceWrapper(std::shared_ptr<mechanism::ProviderContext> inner) : inner_(std::move(inner)) {}
  ProviderContextIdentity context() const noexcept override { return inner_->context(); }
  Expected<ProviderContextPin, ProviderContextPinError> pin() noexcept override { return inner_->pin(); }

 protected:
  std::shared_ptr<mechanism::ProviderContext> inner_;
};

// Keeps granting pins after retirement, from a shadow context that never retires.
class PinsAfterRetirement final : public PinSourceWrapper {
 public:
  explicit PinsAfterRetirement(std::shared_ptr<mechanism::ProviderContext> inner)
      : PinSourceWrapper(inner), shadow_(std::make_shared<mechanism::ProviderContext>(inner->context())) {}
  Expected<ProviderContextPin, ProviderContextPinError> pin() noexcept override {
    auto pin = inner_->pin();
    return pin ? std::move(pin) : shadow_->pin();
  }

 private:
  std::shared_ptr<mechanism::ProviderContext> shadow_;
};

// Pins name a context other than the source's.
class WrongContextPins final : public PinSourceWrapper {
 public:
  explicit WrongContextPins(std::shared_ptr<mechanism::ProviderContext> inner)
      : PinSourceWrapper(inner), other_(std::make_shared<mechanism::ProviderContext>(
                                     *(*IdentityIssuer::create()).issue<ProviderContextIdentity>())) {}
  Expected<ProviderContextPin, ProviderContextPinError> pin() noexcept override {
    if (inner_->state() != mechanism::ProviderContext::State::kAccepting) return inner_->pin();
    return other_->pin();
  }

 private:
  std::shared_ptr<mechanism::ProviderContext> other_;
};

template <class Source>
class WrappedContext final : public HostContextUnderTest {
 public:
  WrappedContext(ProviderContextIdentity identity, ContextOptions options)
      : HostContextUnderTest(identity, options), source_(std::make_shared<Source>(reference())) {}
  ProviderContextPinSource& pins() override { return *source_; }
  std::shared_ptr<ProviderContextPinSource> shared_pins() override { return source_; }

 private:
  std::shared_ptr<Source> source_;
};

// Teardown reports success with pins still outstanding.
class EarlyTeardownContext final : public HostContextUnderTest {
 public:
  using HostContextUnderTest::HostContextUnderTest;
  bool teardown(std::chrono::steady_clock::time_point) override {
    reference()->begin_retirement();
    return true;
  }
};

// Ignores the pin cap, so the count can grow past it (a wrap in waiting).
class UncappedContext final : public HostContextUnderTest {
 public:
  UncappedContext(ProviderContextIdentity identity, ContextOptions)
      : HostContextUnderTest(identity, ContextOptions{}) {}
};

// ---- Queue mutants. ----

// A queue wrapper over the reference host queue; each mutant overrides one part.
class QueueWrapper : public QueueUnderTest, public DeferredReleaseQueue {
 public:
  QueueWrapper(std::shared_ptr<ProviderContextPinSource> context, QueueOptions options)
      : inner_(std::move(context), options), options_(options) {}
  DeferredReleaseQueue& queue() override { return *this; }
  void record_use() override { inner_.record_use(); }
  void signal_fences() override { inner_.signal_fences(); }
  std::size_t drain() override { return inner_.drain(); }
  void close() override { inner_.close(); }
  void mark_device_lost() override { inner_.mark_device_lost(); }
  std::optional<std::size_t> capacity() const override { return options_.capacity; }

  Expected<ProviderContextPin, ProviderContextPinError> pin_context() noexcept override {
    return inner_.queue().pin_context();
  }
  Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(PreparedAllocationRelease&& request,
                                                           ProviderContextPin pin) noexcept override {
    return inner_.queue().enqueue(std::move(request), std::move(pin));
  }
  std::size_t pending() const noexcept override { return const_cast<HostQueueUnderTest&>(inner_).queue().pending(); }

 protected:
  HostQueueUnderTest inner_;
  QueueOptions options_;
};

// Drops refused requests and claims success.
class DroppingQueue final : public QueueWrapper {
 public:
  using QueueWrapper::QueueWrapper;
  Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(PreparedAllocationRelease&& request,
                                                           ProviderContextPin pin) noexcept override {
    // A refused request is destroyed with the error here: dropped, not handed back.
    [[maybe_unused]] auto queued = inner_.queue().enqueue(std::move(request), std::move(pin));
    return DeferredEnqueued{};
  }
};

// Executes the newest request first.
class LifoQueue final : public QueueWrapper {
 public:
  using QueueWrapper::QueueWrapper;
  Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(PreparedAllocationRelease&& request,
                                                           ProviderContextPin pin) noexcept override {
    const std::lock_guard lock(mutex_);
    held_.push_back({std::move(request), std::move(pin)});
    return DeferredEnqueued{};
  }
  // Guarded like a sound queue (its bug is the order, not a race), and run
  // outside the lock so a release may call back in.
  std::size_t drain() override {
    std::size_t ran = 0;
    for (;;) {
      std::unique_lock lock(mutex_);
      if (held_.empty()) break;
      auto newest = std::move(held_.back());
      held_.pop_back();
      lock.unlock();
      (void)std::move(newest.first).execute();
      ++ran;
    }
    return ran;
  }
  void mark_device_lost() override {
    std::vector<std::pair<PreparedAllocationRelease, ProviderContextPin>> lost;
    {
      const std::lock_guard lock(mutex_);
      lost.swap(held_);
    }
    for (auto& [request, pin] : lost) (void)std::move(request).quarantine_device_lost();
  }
  std::size_t pending() const noexcept override {
    const std::lock_guard lock(mutex_);
    return held_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<PreparedAllocationRelease, ProviderContextPin>> held_;
};

// Waits inside enqueue for the device to finish the work.
class BlockingQueue final : public QueueWrapper {
 public:
  using QueueWrapper::QueueWrapper;
  Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(PreparedAllocationRelease&& request,
                                                           ProviderContextPin pin) noexcept override {
    while (!signalled_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return QueueWrapper::enqueue(std::move(request), std::move(pin));
  }
  void signal_fences() override {
    signalled_ = true;
    QueueWrapper::signal_fences();
  }

 private:
  std::atomic<bool> signalled_{false};
};

// On device loss, runs pending releases through the allocator anyway.
class ReleasesAfterLoss final : public QueueWrapper {
 public:
  using QueueWrapper::QueueWrapper;
  void mark_device_lost() override {
    inner_.signal_fences();
    (void)inner_.drain();
    inner_.mark_device_lost();
  }
};

// Accepts work beyond its declared capacity.
class OverCapacity final : public QueueWrapper {
 public:
  OverCapacity(std::shared_ptr<ProviderContextPinSource> context, QueueOptions options)
      : QueueWrapper(std::move(context), QueueOptions{}) {
    options_ = options;
  }
};

// ---- Test doubles for the runner, not for the contract. ----
// A real allocator bug can crash or hang the process at any call; these do
// it on purpose, on every allocation of 1 MiB or more, so the runner's crash
// safety (one test costs one test, the run goes on and reports) is tested
// against a real SIGSEGV and a real hang. They are not in manifest.json: no
// requirement is theirs.

class SegfaultsOnAllocate final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (bytes >= (1U << 20)) {
      // A dying allocator's last words need not be UTF-8; the report must survive them.
      std::fputs("segfaulting on purpose \xff\xfe\n", stderr);
      std::raise(SIGSEGV);
    }
    return reference_.allocate(bytes, align);
  }
};

class HangsOnAllocate final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    while (bytes >= (1U << 20)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return reference_.allocate(bytes, align);
  }
};

// A runaway: asked for 1 MiB or more, it takes memory until none is left,
// then aborts. The runner's memory limit makes that cost one test.
class RunsAwayOnAllocate final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (bytes >= (1U << 20)) {
      constexpr std::size_t kChunk = std::size_t{64} << 20;
      for (;;) {
        auto* chunk = static_cast<unsigned char*>(std::malloc(kChunk));
        if (chunk == nullptr) std::abort();
        for (std::size_t i = 0; i < kChunk; i += 4096) chunk[i] = 1;  // really use it
      }
    }
    return reference_.allocate(bytes, align);
  }
};

// Every other allocator this process makes returns misaligned addresses: a
// test run twice in one process passes once and fails once, as a race does.
class MisalignsEveryOtherInstance final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    auto ptr = reference_.allocate(bytes + 1, align);
    if (!ptr || !bad_ || align == 1) return ptr;
    return static_cast<void*>(static_cast<unsigned char*>(*ptr) + 1);
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    void* original = !bad_ || align == 1 ? ptr : static_cast<void*>(static_cast<unsigned char*>(ptr) - 1);
    auto outcome = reference_.release(original, bytes + 1, align);
    return outcome.is_complete() ? AllocationReleaseOutcome::complete(ReleaseAccounting::eager(bytes)) : outcome;
  }

 private:
  static inline std::atomic<int> instances_{0};
  const bool bad_ = instances_.fetch_add(1) % 2 == 1;
};

template <class Variant>
void add(const std::string& name) {
  register_variant<Variant>(name, kKnownBad);
}

}  // namespace

void register_mutant_adapters() {
  add<WithAllocator<Misaligned>>("mutant:misaligned");
  add<WithAllocator<Overlapping>>("mutant:overlapping");
  add<WithAllocator<Corrupting>>("mutant:corrupting");
  add<WithAllocator<WrongAccounting>>("mutant:wrong-accounting");
  add<WithAllocator<FailedAfterFree>>("mutant:failed-after-free");
  add<WithAllocator<UnknownComplete>>("mutant:unknown-complete");
  add<WithAllocator<LargeReleaseKeepsBlock>>("mutant:large-release-keeps-block");
  add<WithAllocator<UnstableDiscovery>>("mutant:unstable-discovery");
  add<WithAllocator<WanderingDevice>>("mutant:wandering-device");
  add<WithAllocator<ReasonlessFailure>>("mutant:reasonless-failure");
  add<WithAllocator<MisfiledFailure>>("mutant:misfiled-failure");
  add<WithAllocator<FalseOnDemand>>("mutant:false-on-demand");
  add<DeclaresMissingCapability>("mutant:declared-unsupported");
  add<WithContext<WrappedContext<PinsAfterRetirement>>>("mutant:pins-after-retirement");
  add<WithContext<WrappedContext<WrongContextPins>>>("mutant:wrong-context-pins");
  add<WithContext<EarlyTeardownContext>>("mutant:early-teardown");
  add<WithContext<UncappedContext>>("mutant:uncapped-pins");
  add<WithQueue<DroppingQueue>>("mutant:dropping-queue");
  add<WithQueue<LifoQueue>>("mutant:lifo-queue");
  add<WithQueue<BlockingQueue>>("mutant:blocking-enqueue");
  add<WithQueue<ReleasesAfterLoss>>("mutant:releases-after-loss");
  add<WithQueue<OverCapacity>>("mutant:over-capacity");
  add<WithAllocator<SegfaultsOnAllocate>>("double:segfaults-on-allocate");
  add<WithAllocator<HangsOnAllocate>>("double:hangs-on-allocate");
  add<WithAllocator<RunsAwayOnAllocate>>("double:runs-away-on-allocate");
  add<WithAllocator<MisalignsEveryOtherInstance>>("double:misaligns-every-other-instance");
}

}  // namespace ortmem::adapters::mutants
