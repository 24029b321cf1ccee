// adapters/mutants/blind_mutants.cpp: a second batch of known-bad adapters
// written without reading the kit's tests, to measure how deep the suites
// reach (the first batch is hidden_mutants.cpp; none of its bugs is repeated).
//
// Each adapter breaks ONE rule of spec/, the way real allocator bugs do, and
// only in a hard-to-reach place: above a size threshold or for some size x
// alignment combinations, after many operations or on the second use of an
// object, between two steps of the deferred-queue protocol, with several items
// pending or a range list longer than usual, in one field of an otherwise
// right outcome or error, under real thread overlap, or in the bookkeeping of
// shared mappings. Everything else forwards to the host reference (the eager
// HostAllocator, or HostVirtualAllocator for the virtual-backing and
// shared-mapping profiles).
//
// None of them crashes or hangs on purpose: a wait a mutant adds gives up
// after about 100 ms, no byte outside what the mutant owns is written, and
// memory a mutant withholds stays allocated in the reference until the
// allocator goes.
#include <algorithm>
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
#include <span>
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

void register_blind_mutant_adapters();

namespace {

using cts::ContextOptions;
using cts::QueueOptions;
using cts::QueueUnderTest;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kKiB = std::size_t{1} << 10;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;
constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
// The longest a wait added by a mutant lasts.
constexpr auto kGiveUp = std::chrono::milliseconds(100);

// `value` rounded up to `unit` (a power of two), or nullopt when that overflows.
[[nodiscard]] constexpr std::optional<std::size_t> rounded_up(std::size_t value, std::size_t unit) noexcept {
  if (value > kMax - (unit - 1)) return std::nullopt;
  return (value + unit - 1) / unit * unit;
}

[[nodiscard]] std::uintptr_t key_of(const void* ptr) noexcept { return reinterpret_cast<std::uintptr_t>(ptr); }

[[nodiscard]] MemoryError not_ours(std::uint64_t requested) {
  return MemoryError::invalid_request(Tier::kHost, requested,
                                      "mutant: the address is not a live allocation of this mechanism");
}

// ==== Shells. ====

// ALLOC-004. Every allocator, and the adapter's info(), report host memory as (host, 1) (the NUMA node the
// arena was bound to leaks into the key's index). Allocator and info agree with each other, so no device
// check sees a mismatch: only the identity "host memory is (host, 0)" is wrong. Everything else is the
// host reference. (A shell of its own, since info() has to agree with the allocator.)
class NumaNodeAllocator final : public MutantAllocator {
 public:
  DeviceKey device() const noexcept override { return {Tier::kHost, 1}; }
};

class NumaHostAdapter final : public RenamedHostAdapter {
 public:
  using RenamedHostAdapter::RenamedHostAdapter;
  cts::AdapterInfo info() const override {
    auto info = RenamedHostAdapter::info();
    info.device = {Tier::kHost, 1};
    return info;
  }
  std::shared_ptr<DeviceAllocator> make_allocator() override { return std::make_shared<NumaNodeAllocator>(); }
};

// ==== Allocator mutants over the eager host reference. ====

// ALLOC-007. allocate(0, align) with align >= 64 goes to an aligned_alloc(align, 0) that returns null, and the
// null is reported as allocation-failed (the only kinds allowed for a zero-byte request are success and
// invalid-request). Zero bytes with align < 64, and every non-zero request, are served by the reference.
class ZeroBytesOveralignedFails final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (bytes == 0 && is_valid_alignment(align) && align >= 64) {
      return fail(MemoryError::allocation_failed(Tier::kHost, 0, "aligned_alloc returned null for a zero-byte block"));
    }
    return reference_.allocate(bytes, align);
  }
};

// ALLOC-016. A release that finds another release in progress on the allocator (the free-list "is being
// compacted") gives up at once with Failed, nothing changed, instead of waiting its turn. Single-threaded use,
// and threads that never release at the same instant, always get Complete; only real overlap between two
// releases makes a release of a live allocation come back Failed.
class ContendedReleaseFails final : public MutantAllocator {
 public:
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    if (releasing_.exchange(true, std::memory_order_acq_rel)) {
      return AllocationReleaseOutcome::failed("mutant: another release is compacting the free-list; nothing changed");
    }
    auto outcome = reference_.release(ptr, bytes, align);
    releasing_.store(false, std::memory_order_release);
    return outcome;
  }

 private:
  std::atomic<bool> releasing_{false};
};

// ALLOC-008. With align >= 64 KiB (a power of two) and a size that overflows when rounded up to it, the
// large-alignment path refuses with invalid-request as it should, but its reason blames the alignment
// ("not a supported power of two") instead of naming the size overflow. Smaller alignments, and a really
// bad alignment, are refused by the reference with the right reason.
class OverflowBlamedOnAlign final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (is_valid_alignment(align) && align >= 64 * kKiB && bytes > kMax - (align - 1)) {
      return fail(MemoryError::invalid_request(Tier::kHost, bytes,
                                               "alignment is not a power of two supported by the large-block path"));
    }
    return reference_.allocate(bytes, align);
  }
};

// ALLOC-002. Allocation-failed errors for requests of 1 GiB or more carry the backing reason cut to its first
// 24 characters (it travels through a fixed-size field of the huge-block path); kind, tier and requested are
// right, and smaller failures keep their reason whole.
class HugeFailureReasonTruncated final : public MutantAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    auto ptr = reference_.allocate(bytes, align);
    if (ptr || bytes < kGiB || ptr.error().kind() != MemoryError::Kind::kAllocationFailed) return ptr;
    const std::string& reason = ptr.error().reason();
    if (reason.size() <= kField) return ptr;
    return fail(MemoryError::allocation_failed(ptr.error().tier(), ptr.error().requested(), reason.substr(0, kField)));
  }

 private:
  static constexpr std::size_t kField = 24;
};

// ==== Allocator mutants over the host virtual-memory reference. ====

// ALLOC-014. For an allocation reserved lazily (allocate_committed), a decommit of the WHOLE allocation
// [0, allocation_bytes) also ends its life in the mechanism's books ("nothing left to keep"): from then on
// release(ptr, bytes, align) answers Failed (no such live allocation) and every capability call on it is
// refused. The address range itself stays reserved in the reference (never reissued) until the allocator
// goes. Ordinary allocations, and partial decommits, behave.
class FullDecommitEndsLazyAllocation final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    {
      const std::lock_guard lock(mutex_);
      if (ended_.contains(key_of(ptr))) {
        return AllocationReleaseOutcome::failed("mutant: no live allocation at this address; nothing changed");
      }
    }
    auto outcome = inner_->release(ptr, bytes, align);
    if (!outcome.is_failed()) {
      const std::lock_guard lock(mutex_);
      lazy_.erase(key_of(ptr));
    }
    return outcome;
  }
  Expected<void*, MemoryError> allocate_committed(std::size_t bytes, std::size_t align,
                                                  std::span<const ByteRange> committed) noexcept override {
    auto ptr = inner_->allocate_committed(bytes, align, committed);
    if (ptr) {
      const std::lock_guard lock(mutex_);
      try {
        lazy_.insert(key_of(*ptr));
      } catch (const std::bad_alloc&) {
      }
    }
    return ptr;
  }
  Expected<void, MemoryError> commit_allocation_range(void* ptr, std::size_t allocation_bytes, std::size_t align,
                                                      std::size_t offset, std::size_t bytes) noexcept override {
    if (ended(ptr)) return fail(not_ours(bytes));
    return inner_->commit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
  }
  Expected<void, MemoryError> commit_allocation_ranges(
      std::span<const AllocationCommitRange> ranges) noexcept override {
    for (const auto& range : ranges) {
      if (ended(range.ptr)) return fail(not_ours(range.bytes));
    }
    return inner_->commit_allocation_ranges(ranges);
  }
  Expected<std::uint64_t, MemoryError> decommit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                 std::size_t align, std::size_t offset,
                                                                 std::size_t bytes) noexcept override {
    if (ended(ptr)) return fail(not_ours(bytes));
    auto unmapped = inner_->decommit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
    if (unmapped && offset == 0 && bytes == allocation_bytes) {
      const std::lock_guard lock(mutex_);
      if (lazy_.erase(key_of(ptr)) != 0) {
        try {
          ended_.insert(key_of(ptr));  // the bug: a capability ended the allocation
        } catch (const std::bad_alloc&) {
        }
      }
    }
    return unmapped;
  }
  std::size_t allocation_committed_bytes(void* ptr, std::size_t allocation_bytes,
                                         std::size_t align) const noexcept override {
    if (ended(ptr)) return 0;
    return inner_->allocation_committed_bytes(ptr, allocation_bytes, align);
  }
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override {
    if (ended(ptr)) return fail(not_ours(allocation_bytes));
    return inner_->commit_shared_prefix(prefix, ptr, allocation_bytes, byte_offset);
  }

 private:
  [[nodiscard]] bool ended(const void* ptr) const {
    const std::lock_guard lock(mutex_);
    return ended_.contains(key_of(ptr));
  }
  mutable std::mutex mutex_;
  std::set<std::uintptr_t> lazy_;   // reserved through allocate_committed, still live
  std::set<std::uintptr_t> ended_;  // "ended" by a full decommit; still reserved in inner_
};

// ALLOC-010. Once the allocator has served more than 200 allocations (ordinary or lazy), as_shared_mapping()
// starts answering null (the capability is withdrawn when "the memfd budget runs low"), although it answered
// the capability before. as_virtual_backing() and device() stay stable.
class SharedMappingWithdrawnAfter200 final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    auto ptr = inner_->allocate(bytes, align);
    if (ptr) served_.fetch_add(1, std::memory_order_acq_rel);
    return ptr;
  }
  Expected<void*, MemoryError> allocate_committed(std::size_t bytes, std::size_t align,
                                                  std::span<const ByteRange> committed) noexcept override {
    auto ptr = inner_->allocate_committed(bytes, align, committed);
    if (ptr) served_.fetch_add(1, std::memory_order_acq_rel);
    return ptr;
  }
  SharedMapping* as_shared_mapping() noexcept override {
    return served_.load(std::memory_order_acquire) > kBudget ? nullptr : this;
  }

 private:
  static constexpr std::uint64_t kBudget = 200;
  std::atomic<std::uint64_t> served_{0};
};

// ALLOC-011. Ordinary allocate() requests over 1 MiB come from an "eager large-block pool" the
// virtual-backing and shared-mapping capabilities do not know: commit, batch commit, decommit and prefix
// commits on such an address are refused as "not an allocation of this mechanism", and
// allocation_committed_bytes reports 0 for it. Smaller ordinary allocations and lazy reservations are
// accepted; the allocator itself releases all of them correctly.
class LargeEagerUnknownToCapabilities final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    auto ptr = inner_->allocate(bytes, align);
    if (ptr && bytes > kMiB) {
      const std::lock_guard lock(mutex_);
      try {
        eager_large_.insert(key_of(*ptr));
      } catch (const std::bad_alloc&) {
      }
    }
    return ptr;
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    auto outcome = inner_->release(ptr, bytes, align);
    if (!outcome.is_failed()) {
      const std::lock_guard lock(mutex_);
      eager_large_.erase(key_of(ptr));
    }
    return outcome;
  }
  Expected<void, MemoryError> commit_allocation_range(void* ptr, std::size_t allocation_bytes, std::size_t align,
                                                      std::size_t offset, std::size_t bytes) noexcept override {
    if (unknown(ptr)) return fail(not_ours(bytes));
    return inner_->commit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
  }
  Expected<void, MemoryError> commit_allocation_ranges(
      std::span<const AllocationCommitRange> ranges) noexcept override {
    for (const auto& range : ranges) {
      if (unknown(range.ptr)) return fail(not_ours(range.bytes));
    }
    return inner_->commit_allocation_ranges(ranges);
  }
  Expected<std::uint64_t, MemoryError> decommit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                 std::size_t align, std::size_t offset,
                                                                 std::size_t bytes) noexcept override {
    if (unknown(ptr)) return fail(not_ours(bytes));
    return inner_->decommit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
  }
  std::size_t allocation_committed_bytes(void* ptr, std::size_t allocation_bytes,
                                         std::size_t align) const noexcept override {
    if (unknown(ptr)) return 0;
    return inner_->allocation_committed_bytes(ptr, allocation_bytes, align);
  }
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override {
    if (unknown(ptr)) return fail(not_ours(allocation_bytes));
    return inner_->commit_shared_prefix(prefix, ptr, allocation_bytes, byte_offset);
  }

 private:
  [[nodiscard]] bool unknown(const void* ptr) const {
    const std::lock_guard lock(mutex_);
    return eager_large_.contains(key_of(ptr));
  }
  mutable std::mutex mutex_;
  std::set<std::uintptr_t> eager_large_;
};

// ALLOC-013. commits_on_demand() answers true from the moment the allocator has served its first lazy
// reservation (allocate_committed) ("the mechanism is now in lazy mode"), although nothing here charges a
// governor per commit, and ordinary allocations are still mapped eagerly. Before any lazy reservation it
// answers false, as the reference does.
class ClaimsCommitOnDemandAfterLazy final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  bool commits_on_demand() const noexcept override { return lazy_served_.load(std::memory_order_acquire); }
  Expected<void*, MemoryError> allocate_committed(std::size_t bytes, std::size_t align,
                                                  std::span<const ByteRange> committed) noexcept override {
    auto ptr = inner_->allocate_committed(bytes, align, committed);
    if (ptr) lazy_served_.store(true, std::memory_order_release);
    return ptr;
  }

 private:
  std::atomic<bool> lazy_served_{false};
};

// ==== Virtual-backing mutants. ====

// VB-001. allocate_committed with a list of MORE than 8 ranges (the inline range descriptor holds 8) commits
// the hull of the list, [lowest begin, highest end), instead of only the listed ranges, so
// allocation_committed_bytes exceeds the listed ranges rounded out to granules whenever they leave gaps.
// Every listed byte is usable; lists of up to 8 ranges are committed exactly.
class CommittedListOver8Hull final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<void*, MemoryError> allocate_committed(std::size_t bytes, std::size_t align,
                                                  std::span<const ByteRange> committed) noexcept override {
    if (committed.size() > kInline) {
      bool sane = true;
      std::size_t low = kMax;
      std::size_t high = 0;
      for (const ByteRange& range : committed) {
        if (range.begin > range.end || range.end > bytes) {
          sane = false;
        } else if (range.begin < range.end) {
          low = std::min(low, range.begin);
          high = std::max(high, range.end);
        }
      }
      if (sane && low < high) {
        const ByteRange hull{low, high};
        return inner_->allocate_committed(bytes, align, std::span<const ByteRange>(&hull, 1));
      }
    }
    return inner_->allocate_committed(bytes, align, committed);
  }

 private:
  static constexpr std::size_t kInline = 8;
};

// VB-005 (and VB-002's "committed bytes have grown"). allocation_committed_bytes is memoised per allocation;
// single commits, decommits, prefix commits and releases drop the memo, but the batch path
// (commit_allocation_ranges) forgets to, so after a batch commit an allocation whose committed bytes were
// read before the batch keeps reporting the old figure until its next single commit or decommit. The memory
// itself is committed correctly.
class BatchCommitKeepsStaleCommitted final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    auto ptr = inner_->allocate(bytes, align);
    if (ptr) forget(*ptr);
    return ptr;
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    forget(ptr);
    return inner_->release(ptr, bytes, align);
  }
  Expected<void*, MemoryError> allocate_committed(std::size_t bytes, std::size_t align,
                                                  std::span<const ByteRange> committed) noexcept override {
    auto ptr = inner_->allocate_committed(bytes, align, committed);
    if (ptr) forget(*ptr);
    return ptr;
  }
  Expected<void, MemoryError> commit_allocation_range(void* ptr, std::size_t allocation_bytes, std::size_t align,
                                                      std::size_t offset, std::size_t bytes) noexcept override {
    auto done = inner_->commit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
    forget(ptr);
    return done;
  }
  // commit_allocation_ranges: inherited, and the bug: it does not forget the memo.
  Expected<std::uint64_t, MemoryError> decommit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                 std::size_t align, std::size_t offset,
                                                                 std::size_t bytes) noexcept override {
    auto unmapped = inner_->decommit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
    forget(ptr);
    return unmapped;
  }
  std::size_t allocation_committed_bytes(void* ptr, std::size_t allocation_bytes,
                                         std::size_t align) const noexcept override {
    {
      const std::lock_guard lock(mutex_);
      const auto found = memo_.find(key_of(ptr));
      if (found != memo_.end() && found->second.bytes == allocation_bytes && found->second.align == align) {
        return found->second.committed;
      }
    }
    const std::size_t committed = inner_->allocation_committed_bytes(ptr, allocation_bytes, align);
    const std::lock_guard lock(mutex_);
    try {
      memo_[key_of(ptr)] = Memo{allocation_bytes, align, committed};
    } catch (const std::bad_alloc&) {
    }
    return committed;
  }
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override {
    auto info = inner_->commit_shared_prefix(prefix, ptr, allocation_bytes, byte_offset);
    forget(ptr);
    return info;
  }

 private:
  struct Memo {
    std::size_t bytes;
    std::size_t align;
    std::size_t committed;
  };
  void forget(const void* ptr) const {
    const std::lock_guard lock(mutex_);
    memo_.erase(key_of(ptr));
  }
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::uintptr_t, Memo> memo_;
};

// VB-004. mapped_bytes_for_allocation_ranges over a list of MORE than 8 ranges estimates only the first 8
// (the estimate reuses the 8-entry batch descriptor), so for lists of 9-16 ranges it is lower than what
// committing the same list maps. Lists of up to 8, and mapped_bytes_for_allocation, are exact.
class RangeEstimateFirst8 final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<std::uint64_t, MemoryError> mapped_bytes_for_allocation_ranges(
      std::span<const AllocationCommitRange> ranges) const noexcept override {
    if (ranges.size() > kBatch) return inner_->mapped_bytes_for_allocation_ranges(ranges.first(kBatch));
    return inner_->mapped_bytes_for_allocation_ranges(ranges);
  }

 private:
  static constexpr std::size_t kBatch = 8;
};

// VB-003. Decommit AFTER recommit: once a range (ptr, offset, bytes) has been decommitted and then committed
// again exactly, the recommit marks its edge granules as owned by that range alone, so the next decommit of
// that same range returns the range rounded OUT to whole granules, counting edge granules that stay mapped
// because they still back committed bytes outside the range. The unmapping itself is right; first decommits
// are counted right.
class RecommittedDecommitRoundsOut final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    auto outcome = inner_->release(ptr, bytes, align);
    if (!outcome.is_failed()) {
      const std::lock_guard lock(mutex_);
      tracks_.erase(key_of(ptr));
    }
    return outcome;
  }
  Expected<void, MemoryError> commit_allocation_range(void* ptr, std::size_t allocation_bytes, std::size_t align,
                                                      std::size_t offset, std::size_t bytes) noexcept override {
    auto done = inner_->commit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
    if (done) {
      const std::lock_guard lock(mutex_);
      const auto found = tracks_.find(key_of(ptr));
      if (found != tracks_.end() && contains(found->second.decommitted, {offset, offset + bytes})) {
        try {
          found->second.recommitted.push_back({offset, offset + bytes});
        } catch (const std::bad_alloc&) {
        }
      }
    }
    return done;
  }
  Expected<std::uint64_t, MemoryError> decommit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                 std::size_t align, std::size_t offset,
                                                                 std::size_t bytes) noexcept override {
    auto unmapped = inner_->decommit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
    if (!unmapped || bytes == 0) return unmapped;
    const ByteRange range{offset, offset + bytes};
    const std::lock_guard lock(mutex_);
    try {
      Track& track = tracks_[key_of(ptr)];
      if (contains(track.recommitted, range)) {
        const std::size_t g = granule();
        const std::size_t low = offset / g * g;
        const std::size_t high = rounded_up(offset + bytes, g).value_or(offset + bytes);
        return std::uint64_t{high - low};  // the bug: edge granules counted although they stay mapped
      }
      if (!contains(track.decommitted, range)) track.decommitted.push_back(range);
    } catch (const std::bad_alloc&) {
    }
    return unmapped;
  }

 private:
  struct Track {
    std::vector<ByteRange> decommitted;
    std::vector<ByteRange> recommitted;
  };
  static bool contains(const std::vector<ByteRange>& ranges, ByteRange range) {
    return std::find(ranges.begin(), ranges.end(), range) != ranges.end();
  }
  std::mutex mutex_;
  std::unordered_map<std::uintptr_t, Track> tracks_;
};

// VB-006. Physical handles of decommitted granules are parked in a one-shot recycle slot per allocation: the
// FIRST recommit of any previously decommitted bytes of an allocation works, but every later single-range
// commit that touches bytes decommitted before fails with allocation-failed ("recycle slot empty"), without
// falling back to fresh memory. Nothing is changed by the failing commit.
class SecondRecommitFails final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    auto outcome = inner_->release(ptr, bytes, align);
    if (!outcome.is_failed()) {
      const std::lock_guard lock(mutex_);
      tracks_.erase(key_of(ptr));
    }
    return outcome;
  }
  Expected<void, MemoryError> commit_allocation_range(void* ptr, std::size_t allocation_bytes, std::size_t align,
                                                      std::size_t offset, std::size_t bytes) noexcept override {
    bool recommit = false;
    if (bytes != 0 && offset <= kMax - bytes) {
      const std::lock_guard lock(mutex_);
      const auto found = tracks_.find(key_of(ptr));
      if (found != tracks_.end()) {
        for (const ByteRange& gone : found->second.decommitted) {
          if (gone.begin < offset + bytes && offset < gone.end) recommit = true;
        }
        if (recommit && found->second.recommits >= 1) {
          return fail(MemoryError::allocation_failed(Tier::kHost, bytes,
                                                     "mutant: the recycle slot of decommitted granules is empty"));
        }
      }
    }
    auto done = inner_->commit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
    if (done && recommit) {
      const std::lock_guard lock(mutex_);
      ++tracks_[key_of(ptr)].recommits;
    }
    return done;
  }
  Expected<std::uint64_t, MemoryError> decommit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                 std::size_t align, std::size_t offset,
                                                                 std::size_t bytes) noexcept override {
    auto unmapped = inner_->decommit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
    if (unmapped && bytes != 0) {
      const std::lock_guard lock(mutex_);
      try {
        tracks_[key_of(ptr)].decommitted.push_back({offset, offset + bytes});
      } catch (const std::bad_alloc&) {
      }
    }
    return unmapped;
  }

 private:
  struct Track {
    std::vector<ByteRange> decommitted;
    std::size_t recommits = 0;
  };
  std::mutex mutex_;
  std::unordered_map<std::uintptr_t, Track> tracks_;
};

// VB-007. For an allocation whose size is not a whole number of granules, a single-range commit that runs
// past the allocation's end but stays inside its last (rounded-up) granule is not refused: it is clamped to
// the allocation's end and committed, changing the committed bytes, where it must fail and change nothing.
// Ranges that run further, and allocations of whole granules, are refused by the reference.
class CommitTailSlackAccepted final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<void, MemoryError> commit_allocation_range(void* ptr, std::size_t allocation_bytes, std::size_t align,
                                                      std::size_t offset, std::size_t bytes) noexcept override {
    const std::size_t g = granule();
    const auto rounded = rounded_up(allocation_bytes, g);
    if (rounded && allocation_bytes % g != 0 && offset <= allocation_bytes && bytes > allocation_bytes - offset &&
        bytes - (allocation_bytes - offset) <= *rounded - allocation_bytes) {
      if (offset == allocation_bytes) return {};  // "nothing left to commit"
      return inner_->commit_allocation_range(ptr, allocation_bytes, align, offset, allocation_bytes - offset);
    }
    return inner_->commit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
  }
};

// VB-008. A decommit spanning more than one granule is carried out in two calls, the first granule (or the
// part of it in the range) and then the rest; if the second call fails (an injected decommit fault on a later
// call), the first part stays decommitted and the whole decommit is reported as SUCCESS with the first part's
// bytes. A failure of the first call is reported honestly, and single-granule decommits are untouched.
class ChunkedDecommitPartialSuccess final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<std::uint64_t, MemoryError> decommit_allocation_range(void* ptr, std::size_t allocation_bytes,
                                                                 std::size_t align, std::size_t offset,
                                                                 std::size_t bytes) noexcept override {
    const std::size_t g = granule();
    if (bytes == 0 || offset > allocation_bytes || bytes > allocation_bytes - offset ||
        offset / g == (offset + bytes - 1) / g) {
      return inner_->decommit_allocation_range(ptr, allocation_bytes, align, offset, bytes);
    }
    const std::size_t split = (offset / g + 1) * g;
    auto head = inner_->decommit_allocation_range(ptr, allocation_bytes, align, offset, split - offset);
    if (!head) return head;
    auto rest = inner_->decommit_allocation_range(ptr, allocation_bytes, align, split, offset + bytes - split);
    if (!rest) return *head;  // the bug: a partial change reported as success
    return *head + *rest;
  }
};

// ==== Shared-mapping mutants. ====

// SM-004. From the THIRD successful mapping of one prefix on (its mapping list spills out of the two inline
// slots into a page-table block that is "charged to the sharer"), commit_shared_prefix reports
// additional_owned_bytes equal to the prefix's mapped bytes instead of 0. newly_mapped_bytes and granules
// stay right, and the first two mappings report 0.
class ThirdMappingCharged final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> create_shared_prefix(std::size_t bytes) noexcept override {
    auto prefix = inner_->create_shared_prefix(bytes);
    if (prefix && *prefix) {
      const std::lock_guard lock(mutex_);
      mappings_.erase((*prefix)->device_ptr());
    }
    return prefix;
  }
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override {
    auto info = inner_->commit_shared_prefix(prefix, ptr, allocation_bytes, byte_offset);
    if (!info) return info;
    const std::lock_guard lock(mutex_);
    try {
      if (++mappings_[prefix.device_ptr()] > kInline) info->additional_owned_bytes = prefix.mapped_bytes();
    } catch (const std::bad_alloc&) {
    }
    return info;
  }

 private:
  static constexpr std::size_t kInline = 2;
  std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::size_t> mappings_;  // prefix (by device_ptr) -> mappings made
};

// SM-005. An offset that is not granule-aligned but lies in the LOWER half of a granule is rounded down to the
// granule ("round to nearest") and the prefix is mapped there, where the commit must be refused. Offsets in
// the upper half of a granule, and every aligned offset, are handled by the reference.
class PrefixOffsetRoundedDown final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override {
    const std::size_t slack = byte_offset % granule();
    if (slack != 0 && slack < granule() / 2) {
      return inner_->commit_shared_prefix(prefix, ptr, allocation_bytes, byte_offset - slack);
    }
    return inner_->commit_shared_prefix(prefix, ptr, allocation_bytes, byte_offset);
  }
};

// SM-006. The target check of commit_shared_prefix compares granule counts, not sizes: an allocation_bytes
// that differs from the live allocation's size but rounds up to the same number of granules (for example
// one byte short of a whole-granule allocation) is accepted and the prefix mapped. A size in another granule
// count, or an address that is not live, is refused by the reference.
class PrefixTargetSizeByGranules final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    return remember(inner_->allocate(bytes, align), bytes);
  }
  Expected<void*, MemoryError> allocate_committed(std::size_t bytes, std::size_t align,
                                                  std::span<const ByteRange> committed) noexcept override {
    return remember(inner_->allocate_committed(bytes, align, committed), bytes);
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    auto outcome = inner_->release(ptr, bytes, align);
    if (!outcome.is_failed()) {
      const std::lock_guard lock(mutex_);
      live_.erase(key_of(ptr));
    }
    return outcome;
  }
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override {
    std::optional<std::size_t> live_bytes;
    {
      const std::lock_guard lock(mutex_);
      const auto found = live_.find(key_of(ptr));
      if (found != live_.end()) live_bytes = found->second;
    }
    if (live_bytes && *live_bytes != allocation_bytes) {
      const auto ours = rounded_up(*live_bytes, granule());
      const auto theirs = rounded_up(allocation_bytes, granule());
      if (ours && theirs && *ours == *theirs) {
        return inner_->commit_shared_prefix(prefix, ptr, *live_bytes, byte_offset);  // the bug
      }
    }
    return inner_->commit_shared_prefix(prefix, ptr, allocation_bytes, byte_offset);
  }

 private:
  Expected<void*, MemoryError> remember(Expected<void*, MemoryError> ptr, std::size_t bytes) {
    if (ptr) {
      const std::lock_guard lock(mutex_);
      try {
        live_[key_of(*ptr)] = bytes;
      } catch (const std::bad_alloc&) {
      }
    }
    return ptr;
  }
  std::mutex mutex_;
  std::unordered_map<std::uintptr_t, std::size_t> live_;  // address -> size, for allocations of this allocator
};

// SM-002. The cost query memoises its answer by mapped size ("the cost only depends on the size") and looks
// the memo up BEFORE checking who made the prefix: once a prefix of some mapped size has been costed, any
// prefix of that mapped size, a foreign one included, is answered with the memoised cost (0) instead of the
// refusal commit_shared_prefix gives it. The first query of each size, and every commit, check ownership.
class ForeignPrefixCostMemoised final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  Expected<std::uint64_t, MemoryError> incremental_owned_bytes_for_shared_prefix(
      const SharedDevicePrefix& prefix) const noexcept override {
    const std::size_t size = prefix.mapped_bytes();
    {
      const std::lock_guard lock(mutex_);
      const auto found = memo_.find(size);
      if (found != memo_.end()) return found->second;  // the bug: before the ownership check
    }
    auto cost = inner_->incremental_owned_bytes_for_shared_prefix(prefix);
    if (cost) {
      const std::lock_guard lock(mutex_);
      try {
        memo_.emplace(size, *cost);
      } catch (const std::bad_alloc&) {
      }
    }
    return cost;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::size_t, std::uint64_t> memo_;
};

// SM-009. Dropping a prefix HANDLE while TWO OR MORE mappings of it remain returns its physical memory to a
// recycle pool, which scrubs it (zero-fills it through the owner's read-write window) for the next owner:
// the remaining mappings stay mapped and readable, but from then on read zeros instead of the prefix's
// bytes. With at most one mapping left at that moment, or when the mappings go before the handle, the bytes
// survive as they should. (The write is through the owner window this allocator made; nothing else is touched.)
struct ScrubBook {
  std::mutex mutex;
  bool allocator_alive = true;  // the owner windows are only written while their allocator exists
  std::uint64_t next_id = 1;
  std::unordered_map<std::uintptr_t, std::vector<std::uint64_t>> targets;  // target address -> prefixes mapped in it
  std::unordered_map<std::uint64_t, std::size_t> mappings;                 // prefix id -> live mappings
};

class ScrubbingPrefix final : public SharedDevicePrefix {
 public:
  ScrubbingPrefix(std::unique_ptr<SharedDevicePrefix> inner, std::shared_ptr<ScrubBook> book, std::uint64_t id) noexcept
      : inner_(std::move(inner)), book_(std::move(book)), id_(id) {}
  ~ScrubbingPrefix() override {
    // Under the book's lock, so the allocator cannot go while the owner window is written.
    const std::lock_guard lock(book_->mutex);
    const auto found = book_->mappings.find(id_);
    const std::size_t live = found != book_->mappings.end() ? found->second : 0;
    if (book_->allocator_alive && live >= 2 && inner_->requested_bytes() != 0) {
      // The bug: recycled (scrubbed) while still mapped.
      std::memset(reinterpret_cast<void*>(static_cast<std::uintptr_t>(inner_->device_ptr())), 0,
                  inner_->requested_bytes());
    }
  }
  ScrubbingPrefix(const ScrubbingPrefix&) = delete;
  ScrubbingPrefix& operator=(const ScrubbingPrefix&) = delete;

  std::uint64_t device_ptr() const noexcept override { return inner_->device_ptr(); }
  std::uint64_t committed_physical_bytes() const noexcept override { return inner_->committed_physical_bytes(); }
  std::size_t mapped_bytes() const noexcept override { return inner_->mapped_bytes(); }
  std::size_t requested_bytes() const noexcept override { return inner_->requested_bytes(); }

  [[nodiscard]] const SharedDevicePrefix& inner() const noexcept { return *inner_; }
  [[nodiscard]] const ScrubBook* book() const noexcept { return book_.get(); }
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }

 private:
  std::unique_ptr<SharedDevicePrefix> inner_;
  std::shared_ptr<ScrubBook> book_;
  std::uint64_t id_;
};

class PrefixHandleDropScrubs final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  ~PrefixHandleDropScrubs() override {
    const std::lock_guard lock(book_->mutex);
    book_->allocator_alive = false;
  }
  PrefixHandleDropScrubs(const PrefixHandleDropScrubs&) = delete;
  PrefixHandleDropScrubs& operator=(const PrefixHandleDropScrubs&) = delete;
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    auto outcome = inner_->release(ptr, bytes, align);
    if (!outcome.is_failed()) {
      const std::lock_guard lock(book_->mutex);
      const auto found = book_->targets.find(key_of(ptr));
      if (found != book_->targets.end()) {
        for (const std::uint64_t id : found->second) {
          const auto count = book_->mappings.find(id);
          if (count != book_->mappings.end() && count->second != 0) --count->second;
        }
        book_->targets.erase(found);
      }
    }
    return outcome;
  }
  Expected<std::unique_ptr<SharedDevicePrefix>, MemoryError> create_shared_prefix(std::size_t bytes) noexcept override {
    auto prefix = inner_->create_shared_prefix(bytes);
    if (!prefix || !*prefix) return prefix;
    std::uint64_t id = 0;
    {
      const std::lock_guard lock(book_->mutex);
      id = book_->next_id++;
    }
    auto* wrapped = new (std::nothrow) ScrubbingPrefix(std::move(*prefix), book_, id);
    if (wrapped == nullptr) {
      return fail(MemoryError::allocation_failed(Tier::kHost, bytes, "out of memory for the prefix record"));
    }
    return std::unique_ptr<SharedDevicePrefix>(wrapped);
  }
  Expected<std::uint64_t, MemoryError> incremental_owned_bytes_for_shared_prefix(
      const SharedDevicePrefix& prefix) const noexcept override {
    return inner_->incremental_owned_bytes_for_shared_prefix(unwrapped(prefix));
  }
  Expected<SharedPrefixCommitInfo, MemoryError> commit_shared_prefix(const SharedDevicePrefix& prefix, void* ptr,
                                                                     std::size_t allocation_bytes,
                                                                     std::size_t byte_offset) noexcept override {
    auto info = inner_->commit_shared_prefix(unwrapped(prefix), ptr, allocation_bytes, byte_offset);
    const auto* ours = dynamic_cast<const ScrubbingPrefix*>(&prefix);
    if (info && ours != nullptr && ours->book() == book_.get()) {
      const std::lock_guard lock(book_->mutex);
      try {
        book_->targets[key_of(ptr)].push_back(ours->id());
        ++book_->mappings[ours->id()];
      } catch (const std::bad_alloc&) {
      }
    }
    return info;
  }

 private:
  static const SharedDevicePrefix& unwrapped(const SharedDevicePrefix& prefix) noexcept {
    const auto* ours = dynamic_cast<const ScrubbingPrefix*>(&prefix);
    return ours != nullptr ? ours->inner() : prefix;
  }
  std::shared_ptr<ScrubBook> book_ = std::make_shared<ScrubBook>();
};

// ==== Pin plumbing. ====

// Which threads hold pins issued through a tracking source, and how many of those pins were lent without a
// claim on the reference context.
class PinBook {
 public:
  void up(std::thread::id taker, bool lent) noexcept {
    if (lent) lent_.fetch_add(1, std::memory_order_acq_rel);
    const std::lock_guard lock(mutex_);
    try {
      holders_.insert(taker);
    } catch (const std::bad_alloc&) {
    }
  }
  void down(std::thread::id taker, bool lent) noexcept {
    if (lent) lent_.fetch_sub(1, std::memory_order_acq_rel);
    const std::lock_guard lock(mutex_);
    if (const auto found = holders_.find(taker); found != holders_.end()) holders_.erase(found);
  }
  [[nodiscard]] bool held_by(std::thread::id thread) const noexcept {
    const std::lock_guard lock(mutex_);
    return holders_.contains(thread);
  }
  [[nodiscard]] std::uint64_t lent() const noexcept { return lent_.load(std::memory_order_acquire); }

 private:
  mutable std::mutex mutex_;
  std::multiset<std::thread::id> holders_;
  std::atomic<std::uint64_t> lent_{0};
};

// One issued pin: holds a reference pin (or, when lent, none), reports the source's context, keeps the book.
class TrackedPin final : public PinAnchor {
 public:
  TrackedPin(ProviderContextIdentity label, std::optional<ProviderContextPin> inner,
             std::shared_ptr<PinBook> book) noexcept
      : label_(label), inner_(std::move(inner)), book_(std::move(book)), lent_(!inner_.has_value()),
        taker_(std::this_thread::get_id()) {
    book_->up(taker_, lent_);
  }
  ProviderContextIdentity context() const noexcept override { return label_; }
  void release_pin() noexcept override {
    inner_.reset();
    book_->down(taker_, lent_);
    delete this;  // called exactly once per claim
  }

 private:
  ~TrackedPin() = default;
  ProviderContextIdentity label_;
  std::optional<ProviderContextPin> inner_;
  std::shared_ptr<PinBook> book_;
  bool lent_;
  std::thread::id taker_;
};

// Wraps every reference pin in a TrackedPin. With `lend_when_held`, a thread that already holds one of its
// pins is lent a further pin (counted in the book only) when the reference refuses with context-unavailable.
class TrackingPinSource final : public ProviderContextPinSource {
 public:
  TrackingPinSource(std::shared_ptr<mechanism::ProviderContext> inner, std::shared_ptr<PinBook> book,
                    bool lend_when_held)
      : inner_(std::move(inner)), book_(std::move(book)), lend_when_held_(lend_when_held) {}
  ProviderContextIdentity context() const noexcept override { return inner_->context(); }
  Expected<ProviderContextPin, ProviderContextPinError> pin() noexcept override {
    auto pin = inner_->pin();
    if (pin) return wrap(std::optional<ProviderContextPin>(std::move(*pin)));
    if (lend_when_held_ && pin.error().kind == ProviderContextPinError::Kind::kContextUnavailable &&
        book_->held_by(std::this_thread::get_id())) {
      return wrap(std::nullopt);  // the bug of NestedPinAfterRetire
    }
    return pin;
  }

 private:
  Expected<ProviderContextPin, ProviderContextPinError> wrap(std::optional<ProviderContextPin> inner) noexcept {
    auto* anchor = new (std::nothrow) TrackedPin(inner_->context(), std::move(inner), book_);
    if (anchor == nullptr) {
      return fail(ProviderContextPinError{ProviderContextPinError::Kind::kPinCountOverflow, inner_->context()});
    }
    return ProviderContextPin::adopt_counted_claim(*anchor);
  }
  std::shared_ptr<mechanism::ProviderContext> inner_;
  std::shared_ptr<PinBook> book_;
  const bool lend_when_held_;
};

// ==== Context mutants. ====

// PIN-002. Pin slots come from a 1024-entry ring whose cursor only moves forward (freed slots are never found
// again): once 1024 pins have been taken through pins() over the context's life, every further pin() on the
// still-accepting context is refused with pin-count-overflow, however few pins are outstanding. Refusals
// because the context stopped accepting work are reported as the reference reports them. The queue's pins
// (shared_pins()) come from the reference directly.
class PinRingSource final : public ProviderContextPinSource {
 public:
  explicit PinRingSource(std::shared_ptr<mechanism::ProviderContext> inner) : inner_(std::move(inner)) {}
  ProviderContextIdentity context() const noexcept override { return inner_->context(); }
  Expected<ProviderContextPin, ProviderContextPinError> pin() noexcept override {
    auto pin = inner_->pin();
    if (!pin) return pin;
    if (cursor_.fetch_add(1, std::memory_order_acq_rel) >= kRing) {
      // The claim just taken goes back when `pin` is destroyed on return.
      return fail(ProviderContextPinError{ProviderContextPinError::Kind::kPinCountOverflow, inner_->context()});
    }
    return pin;
  }

 private:
  static constexpr std::uint64_t kRing = 1024;
  std::shared_ptr<mechanism::ProviderContext> inner_;
  std::atomic<std::uint64_t> cursor_{0};
};

class PinRingExhaustedContext final : public HostContextUnderTest {
 public:
  PinRingExhaustedContext(ProviderContextIdentity identity, ContextOptions options)
      : HostContextUnderTest(identity, options), source_(std::make_shared<PinRingSource>(reference())) {}
  ProviderContextPinSource& pins() override { return *source_; }

 private:
  std::shared_ptr<PinRingSource> source_;
};

// PIN-008. A teardown called on a thread that holds one of the context's pins (taken through pins()) ignores
// its deadline: it spins waiting for the pins to go, which cannot happen while its own caller holds one,
// until its spin limit (100 ms here, standing in for "forever") and only then reports busy. From other
// threads, or with no pin held by the caller, teardown honours its deadline as the reference does.
class SelfHeldTeardownIgnoresDeadlineContext final : public HostContextUnderTest {
 public:
  SelfHeldTeardownIgnoresDeadlineContext(ProviderContextIdentity identity, ContextOptions options)
      : HostContextUnderTest(identity, options), book_(std::make_shared<PinBook>()),
        source_(std::make_shared<TrackingPinSource>(reference(), book_, false)) {}
  ProviderContextPinSource& pins() override { return *source_; }
  bool teardown(Clock::time_point deadline) override {
    if (!book_->held_by(std::this_thread::get_id())) return HostContextUnderTest::teardown(deadline);
    reference()->begin_retirement();
    const auto limit = Clock::now() + kGiveUp;  // the bug: `deadline` is not consulted
    while (reference()->outstanding_pins() != 0 && Clock::now() < limit) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return reference()->try_teardown().has_value();
  }

 private:
  std::shared_ptr<PinBook> book_;
  std::shared_ptr<TrackingPinSource> source_;
};

// PIN-004. A thread that already holds a pin of the context (through pins()) and asks for another after the
// context stopped accepting work (retiring or lost) is lent one ("re-entrant pins are free") instead of being
// refused with context-unavailable. Lent pins are counted: outstanding_pins() and teardown include them, so
// teardown still never completes while one lives. Threads holding no pin are refused as they must be.
class NestedPinAfterRetireContext final : public HostContextUnderTest {
 public:
  NestedPinAfterRetireContext(ProviderContextIdentity identity, ContextOptions options)
      : HostContextUnderTest(identity, options), book_(std::make_shared<PinBook>()),
        source_(std::make_shared<TrackingPinSource>(reference(), book_, true)) {}
  ProviderContextPinSource& pins() override { return *source_; }
  std::optional<std::uint64_t> outstanding_pins() const override {
    return reference()->outstanding_pins() + book_->lent();
  }
  bool teardown(Clock::time_point deadline) override {
    reference()->begin_retirement();
    const auto limit = std::min(deadline, Clock::now() + kGiveUp);
    while (book_->lent() != 0) {
      if (Clock::now() >= limit) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return reference()->teardown(deadline).has_value() && book_->lent() == 0;
  }

 private:
  std::shared_ptr<PinBook> book_;
  std::shared_ptr<TrackingPinSource> source_;
};

// PIN-005. A pin refused with pin-count-overflow still bumps the statistics counter that outstanding_pins()
// reports (it is raised before the cap check and not rolled back), so after each overflow refusal the reported
// number of outstanding pins is one higher than the real one. The real count, and so teardown, are right.
class OverflowSource final : public ProviderContextPinSource {
 public:
  OverflowSource(std::shared_ptr<mechanism::ProviderContext> inner, std::shared_ptr<std::atomic<std::uint64_t>> phantom)
      : inner_(std::move(inner)), phantom_(std::move(phantom)) {}
  ProviderContextIdentity context() const noexcept override { return inner_->context(); }
  Expected<ProviderContextPin, ProviderContextPinError> pin() noexcept override {
    auto pin = inner_->pin();
    if (!pin && pin.error().kind == ProviderContextPinError::Kind::kPinCountOverflow) {
      phantom_->fetch_add(1, std::memory_order_acq_rel);
    }
    return pin;
  }

 private:
  std::shared_ptr<mechanism::ProviderContext> inner_;
  std::shared_ptr<std::atomic<std::uint64_t>> phantom_;
};

class OverflowBumpsReportedCountContext final : public HostContextUnderTest {
 public:
  OverflowBumpsReportedCountContext(ProviderContextIdentity identity, ContextOptions options)
      : HostContextUnderTest(identity, options), phantom_(std::make_shared<std::atomic<std::uint64_t>>(0)),
        source_(std::make_shared<OverflowSource>(reference(), phantom_)) {}
  ProviderContextPinSource& pins() override { return *source_; }
  std::shared_ptr<ProviderContextPinSource> shared_pins() override { return source_; }
  std::optional<std::uint64_t> outstanding_pins() const override {
    return reference()->outstanding_pins() + phantom_->load(std::memory_order_acquire);
  }

 private:
  std::shared_ptr<std::atomic<std::uint64_t>> phantom_;
  std::shared_ptr<OverflowSource> source_;
};

// PIN-006. A RETRIED teardown takes progress for completion: after a teardown has reported busy with N pins
// outstanding, a later teardown that still finds pins alive but fewer than N reports done. The first
// teardown, retries that find no fewer pins, and retries after the last pin went are right.
class RetriedTeardownTrustsProgressContext final : public HostContextUnderTest {
 public:
  using HostContextUnderTest::HostContextUnderTest;
  bool teardown(Clock::time_point deadline) override {
    auto done = reference()->teardown(deadline);
    if (done) return true;
    const std::lock_guard lock(mutex_);
    const std::uint64_t now_outstanding = done.error().outstanding_pins;
    if (!first_busy_) {
      first_busy_ = now_outstanding;
      return false;
    }
    return now_outstanding < *first_busy_;  // the bug: "it is draining, so it is done"
  }

 private:
  std::mutex mutex_;
  std::optional<std::uint64_t> first_busy_;
};

// ==== Queue mutants (fifo_queue.hpp). ====

// DQ-001. A drain looks only at the HEAD's fence: when the oldest pending request's fence has passed, the whole
// queue runs, including requests enqueued after work that was submitted later and is still unsignalled (for
// example: enqueue, signal_fences, record_use, enqueue, drain runs both). With a single request, or when the
// head's fence has not passed, it behaves.
class HeadFenceReleasesAll final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;

 protected:
  std::size_t ready_locked(std::uint64_t completed) const override {
    return !entries_.empty() && entries_.front().fence <= completed ? entries_.size() : 0;
  }
};

// DQ-004. Back-pressure: an enqueue that finds 8 or more requests pending whose head's fence has not passed
// waits for that fence (up to its 100 ms spin limit) before queueing, so enqueue blocks on device work. With
// fewer than 8 pending, or a head that is ready, enqueue returns at once; and it waits at most once for any
// one head fence (so a long fill of an unsignalled queue costs one wait per head, not one per request).
class DeepEnqueueWaitsForHead final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;
  Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(PreparedAllocationRelease&& request,
                                                           ProviderContextPin pin) noexcept override {
    std::optional<std::uint64_t> head;
    {
      const std::lock_guard lock(mutex_);
      if (entries_.size() >= kDeep && entries_.front().fence != waited_for_) {
        head = entries_.front().fence;
        waited_for_ = *head;
      }
    }
    if (head) {
      const auto limit = Clock::now() + kGiveUp;
      while (stream_.completed() < *head && Clock::now() < limit) {  // the bug: waiting on the device
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    return FifoQueue::enqueue(std::move(request), std::move(pin));
  }

 private:
  static constexpr std::size_t kDeep = 8;
  std::optional<std::uint64_t> waited_for_;  // guarded by mutex_
};

// DQ-005 (and so DQ-002 for the request pushed out). A bounded queue that is FULL and holds at least 2
// requests makes room for the newcomer ("keep the freshest work"): it queues the new request and hands back
// the OLDEST pending request in the full rejection instead of the request it was given. With a capacity of 1,
// and for every other rejection, the exact request is handed back.
class FullQueueHandsBackOldest final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;
  Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(PreparedAllocationRelease&& request,
                                                           ProviderContextPin pin) noexcept override {
    const bool foreign = !pin.holds_claim() || pin.context() != identity_ || request.provider_context() != identity_;
    std::optional<Entry> oldest;
    {
      const std::lock_guard lock(mutex_);
      const auto rejection = rejection_locked(entries_.size());
      if (foreign || rejection != DeferredEnqueueRejection::kFull || entries_.size() < 2) {
        // Decided below by the reference behaviour.
      } else {
        Entry fresh{stream_.submitted(), std::move(request), std::move(pin)};
        try {
          entries_.push_back(std::move(fresh));
        } catch (const std::bad_alloc&) {
          return fail(DeferredEnqueueError(DeferredEnqueueRejection::kFull, std::move(fresh.request)));
        }
        oldest.emplace(std::move(entries_.front()));  // the bug: the oldest goes back instead
        entries_.pop_front();
      }
    }
    if (oldest) return fail(DeferredEnqueueError(DeferredEnqueueRejection::kFull, std::move(oldest->request)));
    return FifoQueue::enqueue(std::move(request), std::move(pin));
  }
};

// DQ-006. Once the queue has been closed, a later mark_device_lost() still settles what is pending as
// device-lost, but does not record the loss for rejections ("a closed queue ignores later events"): from then
// on enqueue answers closed where device-lost must win. Loss before close, and loss of an open queue, are
// reported device-lost.
class ClosedHidesLaterLoss final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;

 protected:
  void note_device_lost_locked() override {
    if (!closed_) device_lost_ = true;
  }
};

// DQ-009. An enqueue whose fence has ALREADY passed ("nothing to wait for, it runs on the next drain") drops the
// request's context pin at once instead of keeping it until the request settles, so until the next drain the
// request sits in the queue unpinned and the context's teardown can complete under it. Requests whose
// fence is still pending keep their pin.
class ReadyEnqueueDropsPin final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;

 protected:
  void accepting_locked(Entry& entry) override {
    if (entry.fence <= stream_.completed()) entry.pin.reset();
  }
};

// DQ-013. After a drain, every request that did NOT settle Complete (a device-lost gate, an allocator
// quarantine, a refused release) parks its context pin in a residual list "for diagnostics", kept until the
// queue is destroyed, so a queue holding only settled residuals keeps its context from being torn down.
// Requests that settle Complete, and requests settled by mark_device_lost(), release their pins.
class DrainedResidualKeepsPin final : public FifoQueue {
 public:
  using FifoQueue::FifoQueue;

 protected:
  void settled(Entry& entry, const AllocationReleaseOutcome& outcome) override {
    if (outcome.is_complete()) {
      entry.pin.reset();
      return;
    }
    const std::lock_guard lock(mutex_);
    try {
      residual_pins_.push_back(std::move(entry.pin));
    } catch (const std::bad_alloc&) {
    }
  }

 private:
  std::vector<ProviderContextPin> residual_pins_;
};

template <class Variant>
void add(const std::string& name) {
  register_variant<Variant>(name, kKnownBad);
}

}  // namespace

void register_blind_mutant_adapters() {
  // The eight MUST requirements that had no known-bad adapter of their own (PIN-003 and PIN-010 cannot be
  // broken by an adapter: a pin's operations and the pin errors' wording belong to kit types).
  add<NumaHostAdapter>("blind:numa-host-index");                                                          // ALLOC-004
  add<WithAllocator<ZeroBytesOveralignedFails>>("blind:zero-bytes-overaligned-fails");                    // ALLOC-007
  add<VmmVariant<FullDecommitEndsLazyAllocation>>("blind:full-decommit-ends-lazy");                       // ALLOC-014
  add<WithAllocator<ContendedReleaseFails>>("blind:contended-release-fails");                             // ALLOC-016
  add<WithContext<PinRingExhaustedContext>>("blind:pin-ring-exhausted");                                  // PIN-002
  add<WithContext<SelfHeldTeardownIgnoresDeadlineContext>>("blind:self-held-teardown-ignores-deadline");  // PIN-008
  // Allocator: size thresholds, one field that lies, after many operations.
  add<WithAllocator<OverflowBlamedOnAlign>>("blind:overflow-blamed-on-align");                    // ALLOC-008
  add<WithAllocator<HugeFailureReasonTruncated>>("blind:huge-failure-reason-truncated");          // ALLOC-002
  add<VmmVariant<SharedMappingWithdrawnAfter200>>("blind:shared-mapping-withdrawn-after-200");    // ALLOC-010
  add<VmmVariant<LargeEagerUnknownToCapabilities>>("blind:large-eager-unknown-to-capabilities");  // ALLOC-011
  add<VmmVariant<ClaimsCommitOnDemandAfterLazy>>("blind:claims-commit-on-demand-after-lazy");     // ALLOC-013
  // Virtual backing: long range lists, decommit after recommit, second use, tail slack, partial faults.
  add<VmmVariant<CommittedListOver8Hull>>("blind:committed-list-over-8-hull");               // VB-001
  add<VmmVariant<BatchCommitKeepsStaleCommitted>>("blind:batch-commit-stale-committed");     // VB-005
  add<VmmVariant<RangeEstimateFirst8>>("blind:range-estimate-first-8");                      // VB-004
  add<VmmVariant<RecommittedDecommitRoundsOut>>("blind:recommitted-decommit-rounds-out");    // VB-003
  add<VmmVariant<SecondRecommitFails>>("blind:second-recommit-fails");                       // VB-006
  add<VmmVariant<CommitTailSlackAccepted>>("blind:commit-tail-slack-accepted");              // VB-007
  add<VmmVariant<ChunkedDecommitPartialSuccess>>("blind:chunked-decommit-partial-success");  // VB-008
  // Shared mapping: several mappings per prefix, their charge, placement, release order.
  add<VmmVariant<ThirdMappingCharged>>("blind:third-mapping-charged");                  // SM-004
  add<VmmVariant<PrefixOffsetRoundedDown>>("blind:prefix-offset-rounded-down");         // SM-005
  add<VmmVariant<PrefixTargetSizeByGranules>>("blind:prefix-target-size-by-granules");  // SM-006
  add<VmmVariant<ForeignPrefixCostMemoised>>("blind:foreign-prefix-cost-memoised");     // SM-002
  add<VmmVariant<PrefixHandleDropScrubs>>("blind:prefix-handle-drop-scrubs");           // SM-009
  // Pins: after retirement, at the cap, on retry.
  add<WithContext<NestedPinAfterRetireContext>>("blind:nested-pin-after-retire");                    // PIN-004
  add<WithContext<OverflowBumpsReportedCountContext>>("blind:overflow-bumps-reported-count");        // PIN-005
  add<WithContext<RetriedTeardownTrustsProgressContext>>("blind:retried-teardown-trusts-progress");  // PIN-006
  // Deferred queue: between protocol steps, several pending, after close, settled residuals.
  add<WithQueue<HeadFenceReleasesAll>>("blind:head-fence-releases-all");           // DQ-001
  add<WithQueue<DeepEnqueueWaitsForHead>>("blind:deep-enqueue-waits-for-head");    // DQ-004
  add<WithQueue<FullQueueHandsBackOldest>>("blind:full-queue-hands-back-oldest");  // DQ-005
  add<WithQueue<ClosedHidesLaterLoss>>("blind:closed-hides-later-loss");           // DQ-006
  add<WithQueue<ReadyEnqueueDropsPin>>("blind:ready-enqueue-drops-pin");           // DQ-009
  add<WithQueue<DrainedResidualKeepsPin>>("blind:drained-residual-keeps-pin");     // DQ-013
}

}  // namespace ortmem::adapters::mutants
