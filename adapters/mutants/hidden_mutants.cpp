// adapters/mutants/hidden_mutants.cpp: known-bad adapters written by an
// independent reviewer, without reading the kit's tests, to measure how deep
// the suites reach.
//
// Each adapter breaks ONE rule of spec/, the way real allocator bugs do, and
// only in a hard-to-reach place: above a size threshold, after many operations
// or on reuse, between two steps of the deferred-queue protocol, in one field
// of an otherwise right outcome, under real thread overlap, behind a context
// that hides its pin count, or at the queue's capacity edge. Everything else
// forwards to the host reference. manifest.json lists the requirements each
// one must fail, or, under `escapes`, why the kit does not catch it yet.
//
// None of them crashes or hangs on purpose: a wait a mutant adds gives up
// after about 100 ms. Where the bug is a race, the racy part is a single
// non-atomic read-modify-write (a load and a store of an atomic, so the
// program has no undefined behaviour, only lost updates).
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "host/host_variant.hpp"
#include "host/host_vmm_variant.hpp"
#include "fifo_queue.hpp"
#include "mutant_allocator.hpp"
#include "ortmem/capability.hpp"
#include "ortmem/cts/adapter_registry.hpp"
#include "ortmem/host/host_virtual_allocator.hpp"

namespace ortmem::adapters::mutants {

void register_hidden_mutant_adapters();

namespace {

using cts::ContextOptions;
using cts::ContextUnderTest;
using cts::QueueOptions;
using cts::QueueUnderTest;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kKiB = std::size_t{1} << 10;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGranule = 2 * kMiB;
// The longest a wait added by a mutant lasts.
constexpr auto kGiveUp = std::chrono::milliseconds(100);

[[nodiscard]] Clock::time_point capped(Clock::time_point deadline) {
  const auto limit = Clock::now() + kGiveUp;
  return deadline < limit ? deadline : limit;
}

[[nodiscard]] constexpr std::size_t round_up(std::size_t value, std::size_t granule) noexcept {
  return (value + granule - 1) / granule * granule;
}

// The same refusal, naming `requested` (a mutant that asked the reference for more than the caller did).
[[nodiscard]] MemoryError naming(const MemoryError& error, std::uint64_t requested) {
  switch (error.kind()) {
    case MemoryError::Kind::kInvalidRequest:
      return MemoryError::invalid_request(error.tier(), requested, error.reason());
    case MemoryError::Kind::kAllocationFailed:
      return MemoryError::allocation_failed(error.tier(), requested, error.reason());
    case MemoryError::Kind::kTierExhausted:
    case MemoryError::Kind::kCapacityUnavailable: break;
  }
  return error;
}

// ---- Allocator mutants: size thresholds and size x alignment. ----

// Alignment >= 64 KiB with size > 1 MiB: the large path returns an address aligned only to 4096.
class HugeAlignPageOnly final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (!takes_large_path(bytes, align)) return reference_.allocate(bytes, align);
    const std::lock_guard lock(mutex_);
    auto block = reference_.allocate(bytes + kPage, align);
    if (!block) return fail(naming(block.error(), bytes));
    void* handed = static_cast<unsigned char*>(*block) + kPage;  // a page in: 4096-aligned, not `align`-aligned
    try {
      shifted_.emplace(handed, *block);
    } catch (const std::bad_alloc&) {
      (void)reference_.release(*block, bytes + kPage, align);
      return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "out of memory for the large-block record"));
    }
    return handed;
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    const std::lock_guard lock(mutex_);
    const auto found = shifted_.find(ptr);
    if (found == shifted_.end() || !takes_large_path(bytes, align)) return reference_.release(ptr, bytes, align);
    auto outcome = reference_.release(found->second, bytes + kPage, align);
    if (!outcome.is_complete()) return outcome;
    shifted_.erase(found);
    return AllocationReleaseOutcome::complete(ReleaseAccounting::eager(bytes));
  }

 private:
  static constexpr std::size_t kPage = 4096;
  static bool takes_large_path(std::size_t bytes, std::size_t align) noexcept {
    return is_valid_alignment(align) && align >= 64 * kKiB && bytes > kMiB &&
           bytes <= std::numeric_limits<std::size_t>::max() - align - kPage;
  }
  std::mutex mutex_;
  std::unordered_map<void*, void*> shifted_;  // handed-out address -> reference block
};

// Sizes just above a 2 MiB granule (up to +64 KiB) are carved from slabs at 2 MiB strides: the size is
// rounded DOWN to the granule, so a block's last bytes overlap the next block of the same slab.
class GranuleTailOverlap final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (!from_slab(bytes, align)) return reference_.allocate(bytes, align);
    const std::lock_guard lock(mutex_);
    if (open_ == nullptr) {
      auto slab = reference_.allocate(kSlabBytes, kGranule);
      if (!slab) return fail(naming(slab.error(), bytes));
      open_ = *slab;
      open_used_ = 0;
    }
    void* block = static_cast<unsigned char*>(open_) + open_used_ * kGranule;  // stride = rounded-down size
    try {
      blocks_.emplace(block, Block{open_, bytes, align});
      ++slab_live_[open_];
    } catch (const std::bad_alloc&) {
      blocks_.erase(block);
      return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "out of memory for the slab record"));
    }
    if (++open_used_ == kSlots) open_ = nullptr;  // full: the next request opens a new slab
    return block;
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    const std::lock_guard lock(mutex_);
    const auto found = blocks_.find(ptr);
    if (found == blocks_.end()) return reference_.release(ptr, bytes, align);
    if (found->second.bytes != bytes || found->second.align != align) {
      return AllocationReleaseOutcome::failed("mutant: size or alignment differs from the slab block; nothing changed");
    }
    void* slab = found->second.slab;
    blocks_.erase(found);
    if (--slab_live_[slab] == 0) {
      slab_live_.erase(slab);
      if (open_ == slab) open_ = nullptr;
      (void)reference_.release(slab, kSlabBytes, kGranule);
    }
    return AllocationReleaseOutcome::complete(ReleaseAccounting::eager(bytes));
  }

 private:
  struct Block {
    void* slab;
    std::size_t bytes;
    std::size_t align;
  };
  static constexpr std::size_t kTail = 64 * kKiB;
  static constexpr std::size_t kSlots = 2;
  static constexpr std::size_t kSlabBytes = kSlots * kGranule + kTail;
  static bool from_slab(std::size_t bytes, std::size_t align) noexcept {
    return is_valid_alignment(align) && align <= kGranule && bytes > kGranule && bytes <= kGranule + kTail;
  }
  std::mutex mutex_;
  void* open_ = nullptr;
  std::size_t open_used_ = 0;
  std::unordered_map<void*, Block> blocks_;
  std::unordered_map<void*, std::size_t> slab_live_;
};

// Releases of blocks over 2 MiB match on address and size only: a wrong alignment is freed and reported Complete.
class LargeReleaseIgnoresAlign final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    const std::lock_guard lock(mutex_);
    auto ptr = reference_.allocate(bytes, align);
    if (ptr && bytes > kGranule) {
      try {
        large_[*ptr] = align;
      } catch (const std::bad_alloc&) {
        (void)reference_.release(*ptr, bytes, align);
        return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "out of memory for the huge-block record"));
      }
    }
    return ptr;
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    const std::lock_guard lock(mutex_);
    const auto found = large_.find(ptr);
    // The huge-block path keys by address and trusts the recorded alignment.
    const std::size_t used_align = found != large_.end() && bytes > kGranule ? found->second : align;
    auto outcome = reference_.release(ptr, bytes, used_align);
    if (outcome.is_complete() && found != large_.end()) large_.erase(found);
    return outcome;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, std::size_t> large_;
};

// Releases of 1 MiB or more: Complete with the right allocation_bytes but unmapped_bytes counting a 2 MiB guard
// granule that was never mapped (more bytes unmapped than were released).
class LargeUnmappedOverreported final : public MutantAllocator {
 public:
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    auto outcome = reference_.release(ptr, bytes, align);
    if (!outcome.is_complete() || bytes < kMiB) return outcome;
    return AllocationReleaseOutcome::complete({bytes, round_up(bytes, kGranule) + kGranule});
  }
};

// Errors for requests of 4 GiB or more carry requested() truncated to 32 bits (kind and reason right), so the
// payload and the message name the wrong size.
class HugeRequestSizeTruncated final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    auto ptr = reference_.allocate(bytes, align);
    if (ptr || bytes <= std::numeric_limits<std::uint32_t>::max()) return ptr;
    const auto truncated = static_cast<std::uint32_t>(bytes);  // the size travels through a 32-bit field
    return fail(naming(ptr.error(), truncated));
  }
};

// ---- Allocator mutants: after many operations, or on reuse. ----

// Every 257th successful release (a free-list batch flush) frees the block but reports Failed ("nothing changed").
class Every257thReleaseFailed final : public MutantAllocator {
 public:
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    auto outcome = reference_.release(ptr, bytes, align);
    if (outcome.is_complete() && (completed_.fetch_add(1) + 1) % 257 == 0) {
      return AllocationReleaseOutcome::failed("mutant: the batch flush was interrupted; nothing was changed");
    }
    return outcome;
  }

 private:
  std::atomic<std::uint64_t> completed_{0};
};

// Every 1000th allocate refills a slab and writes its 8-byte free-list link into the first bytes of the most
// recently allocated block that is still live.
class SlabRefillClobbersLive final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    auto ptr = reference_.allocate(bytes, align);
    if (!ptr) return ptr;
    const std::lock_guard lock(mutex_);
    if (++allocations_ % 1000 == 0 && last_ != nullptr && last_bytes_ >= sizeof(std::uintptr_t)) {
      const auto link = reinterpret_cast<std::uintptr_t>(*ptr);
      std::memcpy(last_, &link, sizeof link);
    }
    last_ = *ptr;
    last_bytes_ = bytes;
    return ptr;
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    const std::lock_guard lock(mutex_);
    auto outcome = reference_.release(ptr, bytes, align);
    if (outcome.is_complete() && ptr == last_) last_ = nullptr;
    return outcome;
  }

 private:
  std::mutex mutex_;
  std::uint64_t allocations_ = 0;
  void* last_ = nullptr;
  std::size_t last_bytes_ = 0;
};

// Blocks up to 64 KiB are recycled through a per-(size, align) cache; from a block's second reuse on the cache
// hands it out without popping it, so the next allocation of that size gets the same, still live, address.
class RecycledTwiceOverlaps final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (!cached_size(bytes, align)) return reference_.allocate(bytes, align);
    const std::lock_guard lock(mutex_);
    try {
      auto& free_list = cache_[{bytes, align}];
      if (!free_list.empty()) {
        void* block = free_list.back();
        Block& record = blocks_.at(block);
        if (++record.reuses < 2) {
          free_list.pop_back();
          record.cached = false;
        }  // else: peeked, never popped
        ++record.live;
        return block;
      }
      auto fresh = reference_.allocate(bytes, align);
      if (fresh) blocks_.emplace(*fresh, Block{bytes, align, 1, 0, false});
      return fresh;
    } catch (const std::exception&) {
      return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "out of memory for the block cache"));
    }
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    const std::lock_guard lock(mutex_);
    const auto found = blocks_.find(ptr);
    if (found == blocks_.end()) return reference_.release(ptr, bytes, align);
    Block& record = found->second;
    if (record.live == 0)
      return AllocationReleaseOutcome::failed("mutant: the block is already in the cache; nothing changed");
    if (record.bytes != bytes || record.align != align) {
      return AllocationReleaseOutcome::failed(
          "mutant: size or alignment differs from the cached block; nothing changed");
    }
    if (--record.live == 0 && !record.cached) {
      try {
        cache_[{bytes, align}].push_back(ptr);
        record.cached = true;
      } catch (const std::bad_alloc&) {
        // Not cached: the block stays with the reference until the allocator goes.
      }
    }
    return AllocationReleaseOutcome::complete(ReleaseAccounting::eager(bytes));
  }

 private:
  struct Block {
    std::size_t bytes;
    std::size_t align;
    std::size_t live;
    std::size_t reuses;
    bool cached;
  };
  static bool cached_size(std::size_t bytes, std::size_t align) noexcept {
    return is_valid_alignment(align) && align <= 4096 && bytes > 0 && bytes <= 64 * kKiB;
  }
  std::mutex mutex_;
  std::map<std::pair<std::size_t, std::size_t>, std::vector<void*>> cache_;
  // Every block this cache ever made; each stays allocated in reference_ (freed when the allocator goes).
  std::unordered_map<void*, Block> blocks_;
};

// ---- Allocator mutant: a race. ----

// Blocks up to 256 bytes (align <= 16) are recycled through a free-list whose top index is moved with a
// non-atomic read-modify-write: pop reads the top, records the block under the record lock, and only then
// stores top - 1 (and push likewise), so threads that overlap there can take the same block twice.
class RacyFreeList final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (!pooled_size(bytes, align)) return reference_.allocate(bytes, align);
    // The bug: the top is read here and written back after the record lock, not compare-exchanged.
    const std::size_t top = top_.load(std::memory_order_acquire);
    void* block = top == 0 ? nullptr : slots_[top - 1].load(std::memory_order_acquire);
    const bool recycled = block != nullptr;
    if (!recycled) {
      auto fresh = reference_.allocate(kBlockBytes, kBlockAlign);
      if (!fresh) return fail(naming(fresh.error(), bytes));
      block = *fresh;
    }
    {
      const std::lock_guard lock(mutex_);
      try {
        Block& record = blocks_[block];
        record.bytes = bytes;
        record.align = align;
        ++record.live;
      } catch (const std::bad_alloc&) {
        return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "out of memory for the pool record"));
      }
    }
    if (recycled) top_.store(top - 1, std::memory_order_release);  // popped only once the record exists
    return block;
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    const std::size_t top = top_.load(std::memory_order_acquire);  // the bug again, on the push side
    {
      const std::lock_guard lock(mutex_);
      const auto found = blocks_.find(ptr);
      if (found == blocks_.end()) return reference_.release(ptr, bytes, align);
      Block& record = found->second;
      if (record.live == 0)
        return AllocationReleaseOutcome::failed("mutant: the block is already free; nothing changed");
      if (record.bytes != bytes || record.align != align) {
        return AllocationReleaseOutcome::failed(
            "mutant: size or alignment differs from the pooled block; nothing changed");
      }
      if (--record.live != 0) return AllocationReleaseOutcome::complete(ReleaseAccounting::eager(bytes));
    }
    if (top < kSlots) {  // full: the block stays with the reference until the allocator goes
      slots_[top].store(ptr, std::memory_order_release);
      top_.store(top + 1, std::memory_order_release);
    }
    return AllocationReleaseOutcome::complete(ReleaseAccounting::eager(bytes));
  }

 private:
  struct Block {
    std::size_t bytes = 0;
    std::size_t align = 0;
    std::size_t live = 0;
  };
  static constexpr std::size_t kBlockBytes = 256;
  static constexpr std::size_t kBlockAlign = 16;
  static constexpr std::size_t kSlots = 4096;
  static bool pooled_size(std::size_t bytes, std::size_t align) noexcept {
    return is_valid_alignment(align) && align <= kBlockAlign && bytes > 0 && bytes <= kBlockBytes;
  }

  // Every slot below any top ever stored holds a pooled block (or null), so a stale top never
  // reaches past valid pointers.
  std::array<std::atomic<void*>, kSlots> slots_{};
  std::atomic<std::size_t> top_{0};
  std::mutex mutex_;  // guards the records only; the free-list is meant to be "lock-free"
  // Every pooled block ever made; each stays allocated in reference_ (freed when the allocator goes).
  std::unordered_map<void*, Block> blocks_;
};

// ---- Allocator mutant over the host virtual-memory reference (fault injection reaches Quarantined). ----

// A Quarantined release names residual.address = ptr + unmapped_bytes (where it believes the retained bytes
// begin) instead of the allocation's own address; state, reason, retained bytes and alignment are right.
class ResidualAddressShifted final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    auto outcome = inner_->release(ptr, bytes, align);
    if (!outcome.is_quarantined()) return outcome;
    ResidualOwnership residual = *outcome.residual();
    residual.address = reinterpret_cast<std::uintptr_t>(ptr) + outcome.unmapped_bytes();
    return AllocationReleaseOutcome::quarantined(*outcome.accounting(), residual);
  }
};

// ---- Pin plumbing: pins counted on the reference context, relabelled or tallied by the wrapper. ----

// A side count of outstanding pins kept by a wrapper, and which threads took them. The racy variant reads the
// count, registers the holder under its lock, and only then stores count +/- 1 (a non-atomic read-modify-write).
class PinLedger {
 public:
  explicit PinLedger(bool racy) : racy_(racy) {}
  void up(std::thread::id taker) noexcept { adjust(taker, +1); }
  void down(std::thread::id taker) noexcept { adjust(taker, -1); }
  [[nodiscard]] std::uint64_t outstanding() const noexcept {
    const std::int64_t count = count_.load(std::memory_order_acquire);
    return count > 0 ? static_cast<std::uint64_t>(count) : 0;
  }
  [[nodiscard]] bool held_by(std::thread::id thread) const noexcept {
    const std::lock_guard lock(mutex_);
    return holders_.contains(thread);
  }

 private:
  void adjust(std::thread::id taker, std::int64_t delta) noexcept {
    const std::int64_t seen = count_.load(std::memory_order_acquire);
    if (!racy_) count_.fetch_add(delta, std::memory_order_acq_rel);
    {
      const std::lock_guard lock(mutex_);
      try {
        if (delta > 0) {
          holders_.insert(taker);
        } else if (const auto found = holders_.find(taker); found != holders_.end()) {
          holders_.erase(found);
        }
      } catch (const std::bad_alloc&) {
      }
    }
    if (racy_) count_.store(seen + delta, std::memory_order_release);  // the bug
  }

  const bool racy_;
  std::atomic<std::int64_t> count_{0};
  mutable std::mutex mutex_;
  std::multiset<std::thread::id> holders_;
};

// One issued pin: holds a real pin of the reference context, reports `label`, and keeps the ledger informed.
class WrappedPin final : public PinAnchor {
 public:
  WrappedPin(ProviderContextIdentity label, ProviderContextPin inner, std::shared_ptr<PinLedger> ledger) noexcept
      : label_(label), inner_(std::move(inner)), ledger_(std::move(ledger)), taker_(std::this_thread::get_id()) {
    if (ledger_) ledger_->up(taker_);
  }
  ProviderContextIdentity context() const noexcept override { return label_; }
  void release_pin() noexcept override {
    inner_.reset();
    if (ledger_) ledger_->down(taker_);
    delete this;  // called exactly once per claim
  }

 private:
  ~WrappedPin() = default;
  ProviderContextIdentity label_;
  ProviderContextPin inner_;
  std::shared_ptr<PinLedger> ledger_;
  std::thread::id taker_;
};

// Wraps every reference pin; the label is chosen per pin by `label_for`.
class WrappingPinSource : public ProviderContextPinSource {
 public:
  WrappingPinSource(std::shared_ptr<mechanism::ProviderContext> inner, std::shared_ptr<PinLedger> ledger)
      : inner_(std::move(inner)), ledger_(std::move(ledger)) {}
  ProviderContextIdentity context() const noexcept override { return inner_->context(); }
  Expected<ProviderContextPin, ProviderContextPinError> pin() noexcept override {
    auto pin = inner_->pin();
    if (!pin) return pin;
    const ProviderContextIdentity label = label_for();
    auto* anchor = new (std::nothrow) WrappedPin(label, std::move(*pin), ledger_);
    if (anchor == nullptr) {
      return fail(ProviderContextPinError{ProviderContextPinError::Kind::kPinCountOverflow, inner_->context()});
    }
    return ProviderContextPin::adopt_counted_claim(*anchor);
  }

 protected:
  virtual ProviderContextIdentity label_for() noexcept { return inner_->context(); }
  std::shared_ptr<mechanism::ProviderContext> inner_;
  std::shared_ptr<PinLedger> ledger_;
};

// Pins after the source's first one report another context's identity (a recycled pin slot keeps a stale
// label), although every pin is counted on the right context.
class LaterPinsMisnamedSource final : public WrappingPinSource {
 public:
  explicit LaterPinsMisnamedSource(std::shared_ptr<mechanism::ProviderContext> inner)
      : WrappingPinSource(std::move(inner), nullptr),
        stale_(*(*IdentityIssuer::create()).issue<ProviderContextIdentity>()) {}

 protected:
  ProviderContextIdentity label_for() noexcept override {
    return issued_.fetch_add(1) == 0 ? inner_->context() : stale_;
  }

 private:
  const ProviderContextIdentity stale_;
  std::atomic<std::uint64_t> issued_{0};
};

// The kit's direct pins() go through the misnaming source; the queue keeps the reference's own pins.
class LaterPinsMisnamedContext final : public HostContextUnderTest {
 public:
  LaterPinsMisnamedContext(ProviderContextIdentity identity, ContextOptions options)
      : HostContextUnderTest(identity, options), source_(std::make_shared<LaterPinsMisnamedSource>(reference())) {}
  ProviderContextPinSource& pins() override { return *source_; }

 private:
  std::shared_ptr<LaterPinsMisnamedSource> source_;
};

// Waits for `done` until the (capped) deadline; true when it came true.
template <class Done>
bool wait_for(Clock::time_point deadline, Done done) {
  const auto limit = capped(deadline);
  while (!done()) {
    if (Clock::now() >= limit) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// outstanding_pins() and teardown read a side tally updated with a non-atomic read-modify-write, so concurrent
// pin/unpin loses counts (teardown may then report done with pins alive, or never).
class RacyPinCountContext final : public HostContextUnderTest {
 public:
  RacyPinCountContext(ProviderContextIdentity identity, ContextOptions options)
      : HostContextUnderTest(identity, options), ledger_(std::make_shared<PinLedger>(true)),
        source_(std::make_shared<WrappingPinSource>(reference(), ledger_)) {}
  ProviderContextPinSource& pins() override { return *source_; }
  std::shared_ptr<ProviderContextPinSource> shared_pins() override { return source_; }
  std::optional<std::uint64_t> outstanding_pins() const override { return ledger_->outstanding(); }
  bool teardown(Clock::time_point deadline) override {
    reference()->begin_retirement();
    return wait_for(deadline, [&] { return ledger_->outstanding() == 0; });
  }

 private:
  std::shared_ptr<PinLedger> ledger_;
  std::shared_ptr<WrappingPinSource> source_;
};

// ---- Contexts that hide their count (outstanding_pins() is nullopt) and whose teardown lies. ----

// outstanding_pins() is nullopt, and teardown treats its deadline passing as success: it reports done with pins
// still outstanding once it has waited.
class OpaqueTimeoutSuccessContext final : public HostContextUnderTest {
 public:
  using HostContextUnderTest::HostContextUnderTest;
  std::optional<std::uint64_t> outstanding_pins() const override { return std::nullopt; }
  bool teardown(Clock::time_point deadline) override {
    (void)reference()->teardown(capped(deadline));  // busy or not, "we waited long enough"
    return true;
  }
};

// outstanding_pins() is nullopt, and teardown waits only for pins taken through pins() directly: the pins a
// deferred queue takes (through shared_pins()) are not counted, so queued work does not hold teardown back.
class OpaqueIgnoresQueuePinsContext final : public HostContextUnderTest {
 public:
  OpaqueIgnoresQueuePinsContext(ProviderContextIdentity identity, ContextOptions options)
      : HostContextUnderTest(identity, options), ledger_(std::make_shared<PinLedger>(false)),
        source_(std::make_shared<WrappingPinSource>(reference(), ledger_)) {}
  ProviderContextPinSource& pins() override { return *source_; }
  // shared_pins() stays the reference's: the queue's pins bypass the ledger.
  std::optional<std::uint64_t> outstanding_pins() const override { return std::nullopt; }
  bool teardown(Clock::time_point deadline) override {
    reference()->begin_retirement();
    return wait_for(deadline, [&] { return ledger_->outstanding() == 0; });
  }

 private:
  std::shared_ptr<PinLedger> ledger_;
  std::shared_ptr<WrappingPinSource> source_;
};

// outstanding_pins() is nullopt, and a teardown called on a thread that holds one of the context's pins reports
// done at once ("deadlock avoided") instead of refusing or timing out.
class OpaqueSelfHeldTeardownContext final : public HostContextUnderTest {
 public:
  OpaqueSelfHeldTeardownContext(ProviderContextIdentity identity, ContextOptions options)
      : HostContextUnderTest(identity, options), ledger_(std::make_shared<PinLedger>(false)),
        source_(std::make_shared<WrappingPinSource>(reference(), ledger_)) {}
  ProviderContextPinSource& pins() override { return *source_; }
  // shared_pins() stays the reference's: only direct pins record their taker.
  std::optional<std::uint64_t> outstanding_pins() const override { return std::nullopt; }
  bool teardown(Clock::time_point deadline) override {
    if (ledger_->held_by(std::this_thread::get_id())) {
      reference()->begin_retirement();
      return true;
    }
    return HostContextUnderTest::teardown(deadline);
  }

 private:
  std::shared_ptr<PinLedger> ledger_;
  std::shared_ptr<WrappingPinSource> source_;
};

// ---- Queue mutants (fifo_queue.hpp): between two protocol steps. ----

// After a drain has emptied the queue, the next enqueue skips recording a fence ("the stream is idle"), so that
// request runs on the next drain even though work was submitted after the refill and never signalled.
class RefillSkipsFence final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;

 protected:
  std::uint64_t fence_locked() override {
    if (emptied_ && entries_.empty()) {
      emptied_ = false;
      return 0;
    }
    return FifoQueue::fence_locked();
  }
  void on_emptied_locked() override { emptied_ = true; }

 private:
  bool emptied_ = false;
};

// mark_device_lost() after signal_fences() but before drain() runs the requests whose fences were signalled
// through the allocator ("they were finished anyway") instead of settling them as device-lost.
class LossRunsSignalled final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;
  void signal_fences() override {
    FifoQueue::signal_fences();
    const std::lock_guard lock(mutex_);
    signalled_through_ = stream_.completed();  // the completion callback list, consumed by the next drain
  }
  std::size_t drain() override {
    {
      const std::lock_guard lock(mutex_);
      signalled_through_.reset();
    }
    return FifoQueue::drain();
  }
  void mark_device_lost() override {
    std::deque<Entry> lost;
    std::deque<Entry> finished;
    {
      const std::lock_guard lock(mutex_);
      device_lost_ = true;
      lost.swap(entries_);
      while (signalled_through_ && !lost.empty() && lost.front().fence <= *signalled_through_) {
        finished.push_back(std::move(lost.front()));
        lost.pop_front();
      }
      signalled_through_.reset();
    }
    for (Entry& entry : finished) (void)std::move(entry.request).execute();
    for (Entry& entry : lost) (void)std::move(entry.request).quarantine_device_lost();
  }

 private:
  std::optional<std::uint64_t> signalled_through_;
};

// close() also stops the poller: requests already pending when the queue closes never execute (drain runs
// nothing after close), and are abandoned when the queue goes.
class CloseStrandsPending final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;

 protected:
  std::size_t ready_locked(std::uint64_t completed) const override {
    return closed_ ? 0 : FifoQueue::ready_locked(completed);
  }
};

// A drain with more than 8 ready requests executes the overflow beyond the first 8 before the first 8 (the
// 8-slot batch buffer spills in the wrong order).
class BatchOver8Reorders final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;

 protected:
  void order_batch(std::vector<Entry>& batch) override {
    if (batch.size() > kBatch)
      std::rotate(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(kBatch), batch.end());
  }

 private:
  static constexpr std::size_t kBatch = 8;
};

// With 3 or more requests pending, a fast path checks "full" before device-lost and closed, so a full queue
// that is also closed or device-lost answers full.
class DeepQueueFullBeforeClosed final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;

 protected:
  std::optional<DeferredEnqueueRejection> rejection_locked(std::size_t pending) const override {
    if (pending >= 3 && capacity_ && pending >= *capacity_) return DeferredEnqueueRejection::kFull;
    return FifoQueue::rejection_locked(pending);
  }
};

// On device loss with 3 or more requests pending, the requests beyond the second settle as device-lost but
// their context pins are parked in a residual list until the queue is destroyed.
class LossKeepsDeepPins final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;
  void mark_device_lost() override {
    std::deque<Entry> lost;
    {
      const std::lock_guard lock(mutex_);
      device_lost_ = true;
      lost.swap(entries_);
    }
    std::size_t index = 0;
    for (Entry& entry : lost) {
      (void)std::move(entry.request).quarantine_device_lost();
      if (index++ >= 2) {
        const std::lock_guard lock(mutex_);
        try {
          residual_pins_.push_back(std::move(entry.pin));
        } catch (const std::bad_alloc&) {
        }
      }
    }
  }

 private:
  std::vector<ProviderContextPin> residual_pins_;
};

// ---- Queue mutants: a race, and the capacity edge. ----

// pending() reads a counter that enqueue, drain and device loss snapshot on entry and write back on exit, outside
// the queue lock (a non-atomic read-modify-write), so concurrent enqueues and drains lose updates.
class RacyPendingCount final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;
  Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(PreparedAllocationRelease&& request,
                                                           ProviderContextPin pin) noexcept override {
    const std::size_t seen = count_.load(std::memory_order_acquire);
    auto queued = FifoQueue::enqueue(std::move(request), std::move(pin));
    if (queued) count_.store(seen + 1, std::memory_order_release);
    return queued;
  }
  std::size_t drain() override {
    const std::size_t seen = count_.load(std::memory_order_acquire);
    const std::size_t ran = FifoQueue::drain();
    if (ran != 0) count_.store(seen - ran, std::memory_order_release);  // unsigned: a lost enqueue wraps it
    return ran;
  }
  void mark_device_lost() override {
    FifoQueue::mark_device_lost();
    count_.store(0, std::memory_order_release);
  }
  std::size_t pending() const noexcept override { return count_.load(std::memory_order_acquire); }

 private:
  std::atomic<std::size_t> count_{0};
};

// pending() reports one fewer than are waiting when the queue is exactly at capacity (ring-buffer full/empty
// ambiguity); capacity itself is enforced.
class FullQueuePendingOffByOne final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;
  std::size_t pending() const noexcept override {
    const std::size_t waiting = FifoQueue::pending();
    return capacity_ && waiting > 0 && waiting == *capacity_ ? waiting - 1 : waiting;
  }
};

// After the queue has been drained empty once, capacity is enforced as capacity + 1 (the refill path counts the
// recycled slot as free), so a bounded queue can hold one request more than its capacity.
class RefillCapacityPlusOne final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;

 protected:
  std::optional<DeferredEnqueueRejection> rejection_locked(std::size_t pending) const override {
    std::optional<std::size_t> bound = capacity_;
    if (refilled_ && bound) ++*bound;
    return first_rejection(device_lost_, closed_, pending, bound);
  }
  void on_emptied_locked() override { refilled_ = true; }

 private:
  bool refilled_ = false;
};

template <class Variant>
void add(const std::string& name) {
  register_variant<Variant>(name, kKnownBad);
}

}  // namespace

void register_hidden_mutant_adapters() {
  // Size thresholds and size x alignment.
  add<WithAllocator<HugeAlignPageOnly>>("hidden:huge-align-page-only");
  add<WithAllocator<GranuleTailOverlap>>("hidden:granule-tail-overlap");
  add<WithAllocator<LargeReleaseIgnoresAlign>>("hidden:large-release-ignores-align");
  // After many operations, or on reuse.
  add<WithAllocator<Every257thReleaseFailed>>("hidden:every-257th-release-failed");
  add<WithAllocator<SlabRefillClobbersLive>>("hidden:slab-refill-clobbers-live");
  add<WithAllocator<RecycledTwiceOverlaps>>("hidden:recycled-twice-overlaps");
  add<WithContext<LaterPinsMisnamedContext>>("hidden:later-pins-misnamed");
  // Between two steps of the deferred-queue protocol.
  add<WithQueue<RefillSkipsFence>>("hidden:refill-skips-fence");
  add<WithQueue<LossRunsSignalled>>("hidden:loss-runs-signalled");
  add<WithQueue<CloseStrandsPending>>("hidden:close-strands-pending");
  add<WithQueue<BatchOver8Reorders>>("hidden:batch-over-8-reorders");
  add<WithQueue<DeepQueueFullBeforeClosed>>("hidden:deep-queue-full-before-closed");
  add<WithQueue<LossKeepsDeepPins>>("hidden:loss-keeps-deep-pins");
  // One field of an outcome or error lies.
  add<WithAllocator<LargeUnmappedOverreported>>("hidden:large-unmapped-overreported");
  add<VmmVariant<ResidualAddressShifted>>("hidden:residual-address-shifted");
  add<WithAllocator<HugeRequestSizeTruncated>>("hidden:huge-request-size-truncated");
  // Races that need real overlap between threads.
  add<WithAllocator<RacyFreeList>>("hidden:racy-free-list");
  add<WithContext<RacyPinCountContext>>("hidden:racy-pin-count");
  add<WithQueue<RacyPendingCount>>("hidden:racy-pending-count");
  // Contexts that hide their pin count and whose teardown lies.
  add<WithContext<OpaqueTimeoutSuccessContext>>("hidden:opaque-teardown-timeout-success");
  add<WithContext<OpaqueIgnoresQueuePinsContext>>("hidden:opaque-teardown-ignores-queue-pins");
  add<WithContext<OpaqueSelfHeldTeardownContext>>("hidden:opaque-teardown-self-held");
  // The queue's capacity edge.
  add<WithQueue<FullQueuePendingOffByOne>>("hidden:full-queue-pending-off-by-one");
  add<WithQueue<RefillCapacityPlusOne>>("hidden:refill-capacity-plus-one");
}

}  // namespace ortmem::adapters::mutants
