// adapters/controls/controls.cpp: known-GOOD adapters (positive controls).
//
// The mutants (adapters/mutants) prove the kit can fail; these prove it is no
// stricter than the contract. Each control is a complete, correct
// implementation that differs from the host reference in one choice the
// specification leaves open, and names the requirement that permits it. A
// control that the kit does not certify conformant points at a test (or a
// requirement) that demands more than spec/requirements.json says.
//
// Every control is built on the host reference pieces (HostAllocator,
// HostVirtualAllocator, mechanism::ProviderContext, mechanism::FencedDeferredQueue,
// mechanism::HostStream) so that everything except its one choice is the reference's
// behaviour, and every choice is made honestly: no control reports a release
// outcome, a count or a capacity it does not keep.
//
// Choices that the contract turned out NOT to permit, and so have no control:
//   - An allocator that cannot detect a double release (ALLOC-021 is a
//     SHOULD). ALLOC-020 (MUST) already requires Failed for a release whose
//     ptr is not a live allocation, and an allocation disposed of by an
//     earlier release, with nothing allocated in between, is not live; so an
//     allocator that breaks ALLOC-021 necessarily breaks ALLOC-020 too. The
//     teardown controls below (PIN-006/PIN-007/PIN-008) take its place.
//   - An allocator that reports Quarantined with no fault injected (for some
//     class of allocations, as a policy). ALLOC-016 (MUST) requires every
//     release of a live allocation to return Complete when no fault is
//     injected. control:quarantines-partial therefore quarantines only under
//     an injected fault, which ALLOC-019 requires it to report honestly.
//   - A legacy allocator implementing only deallocate (ALLOC-022): the default
//     release reports Complete for any (ptr, bytes, align), which breaks
//     ALLOC-020 for unknown addresses.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
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
#include "host/host_vmm_adapter.hpp"
#include "host/host_vmm_variant.hpp"
#include "ortmem/capability.hpp"
#include "ortmem/cts/adapter_registry.hpp"
#include "ortmem/host/host_allocator.hpp"
#include "ortmem/host/host_virtual_allocator.hpp"
#include "ortmem/mechanism/fault_plan.hpp"
#include "ortmem/mechanism/host_stream.hpp"

namespace ortmem::adapters::controls {

// Registers every "control:<name>" adapter.
void register_control_adapters();

namespace {

using cts::ContextOptions;
using cts::ContextUnderTest;
using cts::QueueOptions;
using cts::QueueUnderTest;

// ---- Shared helpers. ----

[[nodiscard]] std::uintptr_t address_of(const void* ptr) noexcept { return reinterpret_cast<std::uintptr_t>(ptr); }

[[nodiscard]] std::size_t page_size() noexcept {
  const long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<std::size_t>(page) : std::size_t{4096};
}

// The malformed requests of ALLOC-008, refused with the reference's own
// wording (the reason names the cause). Checked before any control's own
// choice applies, so a control never masks a malformed request.
[[nodiscard]] std::optional<MemoryError> malformed(std::size_t bytes, std::size_t align) {
  if (!is_valid_alignment(align)) {
    return MemoryError::invalid_request(Tier::kHost, bytes,
                                        "alignment " + std::to_string(align) + " is not a power of two");
  }
  if (bytes > SIZE_MAX - (align - 1)) {
    return MemoryError::invalid_request(Tier::kHost, bytes,
                                        "the size overflows when rounded up to alignment " + std::to_string(align));
  }
  return std::nullopt;
}

[[nodiscard]] AllocationReleaseOutcome not_live(const char* who) {
  return AllocationReleaseOutcome::failed(std::string("the address is not a live allocation of ") + who +
                                          " (never allocated here, or already released); nothing was changed");
}

[[nodiscard]] AllocationReleaseOutcome mismatched(std::size_t live_bytes, std::size_t live_align, std::size_t bytes,
                                                  std::size_t align) {
  return AllocationReleaseOutcome::failed("the allocation is live with " + std::to_string(live_bytes) +
                                          " bytes at alignment " + std::to_string(live_align) + ", not " +
                                          std::to_string(bytes) + " bytes at alignment " + std::to_string(align) +
                                          "; nothing was changed: release it with its own size and alignment");
}

[[nodiscard]] MemoryError no_room_for_record(std::size_t bytes) {
  return MemoryError::allocation_failed(Tier::kHost, bytes,
                                        "the host is out of memory for the allocator's own live record");
}

// A backing refusal re-attributed to the caller's request size, with the
// backing's own words kept verbatim (ALLOC-002) and its kind kept.
[[nodiscard]] MemoryError for_request(const MemoryError& backing, std::size_t bytes) {
  if (backing.kind() == MemoryError::Kind::kAllocationFailed) {
    return MemoryError::allocation_failed(Tier::kHost, bytes, backing.reason());
  }
  return backing;
}

// What an allocator remembers of one live allocation: the request exactly as
// the caller made it, which is what release must match (ALLOC-020).
struct Requested {
  std::size_t bytes = 0;
  std::size_t align = 0;
};

// ---- 1. control:refuses-zero-bytes ----
//
// Choice: allocate(0, align) is refused with invalid-request instead of being
// served. Permitted by ALLOC-007 (the second of its two answers: "or fails
// with invalid-request"), for "mechanisms whose hardware cannot express an
// empty allocation". The refusal is not silent rounding: the reason says that
// zero-byte blocks are unsupported and what to do, and the message (built by
// MemoryError, ALLOC-003) names the 0 bytes requested, the host tier and the
// fix. A malformed alignment is still reported as such (ALLOC-008) first.
// Everything else is the reference HostAllocator.
class RefusesZeroBytes final : public DeviceAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (bytes == 0 && is_valid_alignment(align)) {
      return fail(MemoryError::invalid_request(
          Tier::kHost, 0,
          "a request for 0 bytes (alignment " + std::to_string(align) +
              ") cannot be served: zero-byte allocations are not supported by this mechanism, which cannot "
              "express an empty block and refuses it rather than handing out a larger one; skip the "
              "allocation for an empty tensor, or ask for at least 1 byte"));
    }
    return reference_.allocate(bytes, align);
  }
  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    return reference_.release(ptr, bytes, align);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    (void)release(ptr, bytes, align);
  }
  DeviceKey device() const noexcept override { return DeviceKey::host(); }

 private:
  host::HostAllocator reference_;
};

// ---- 2. control:pooled-reuse ----
//
// Choice: a size-class pool. A released block goes back to a per-(class,
// alignment) free list, last in first out, so the very next allocate of the
// same class gets the just-released address back. Permitted by ALLOC-017
// (Complete means "freed, or returned to a pool") and by the registry's
// generation rule (BIND: reusing an address gives a new generation), which
// exists precisely because mechanisms reuse addresses.
//
// Still exact on everything else: addresses honour the requested alignment
// (ALLOC-005; blocks of a class are aligned to max(align, 16) and only serve
// requests of that alignment class), live blocks never overlap (ALLOC-006),
// Complete reports allocation_bytes == the size the caller released, not the
// class size (ALLOC-017), a release not matching the live request exactly is
// Failed with nothing changed (ALLOC-020), a second release of a pooled block
// is Failed (ALLOC-021: the block is in the free list, not live), and one lock
// makes it thread-safe (ALLOC-016). Blocks above the largest class are not
// pooled. Every block is a HostAllocator block, freed when the pool goes.
class PooledReuse final : public DeviceAllocator {
 public:
  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (auto bad = malformed(bytes, align)) return fail(std::move(*bad));
    if (bytes > kLargestClass) {
      auto ptr = backing_.allocate(bytes, align);
      if (!ptr) return ptr;
      if (!remember(*ptr, Live{{bytes, align}, 0, 0})) {
        (void)backing_.release(*ptr, bytes, align);
        return fail(no_room_for_record(bytes));
      }
      return ptr;
    }
    const std::size_t class_bytes = std::bit_ceil(std::max(bytes, kSmallestClass));
    const std::size_t block_align = std::max(align, kSmallestBlockAlign);
    const Live live{{bytes, align}, class_bytes, block_align};
    {
      const std::lock_guard lock(mutex_);
      if (auto list = free_.find({class_bytes, block_align}); list != free_.end() && !list->second.empty()) {
        void* ptr = list->second.back();
        try {
          live_.emplace(address_of(ptr), live);
        } catch (const std::bad_alloc&) {
          return fail(no_room_for_record(bytes));
        }
        list->second.pop_back();  // handed straight back: the most recently released block of this class
        return ptr;
      }
    }
    auto block = backing_.allocate(class_bytes, block_align);
    if (!block) return fail(for_request(block.error(), bytes));
    if (!remember(*block, live)) {
      (void)backing_.release(*block, class_bytes, block_align);
      return fail(no_room_for_record(bytes));
    }
    return block;
  }

  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    const std::lock_guard lock(mutex_);
    const auto found = live_.find(address_of(ptr));
    if (found == live_.end()) return not_live("this pooled allocator");
    const Live live = found->second;
    if (live.requested.bytes != bytes || live.requested.align != align) {
      return mismatched(live.requested.bytes, live.requested.align, bytes, align);
    }
    if (live.class_bytes == 0) {  // not pooled: the backing allocator's own, exact outcome
      auto outcome = backing_.release(ptr, bytes, align);
      if (outcome.is_complete()) live_.erase(found);
      return outcome;
    }
    bool pooled = false;
    try {
      auto& list = free_[{live.class_bytes, live.block_align}];
      if (list.size() < kMaxFreePerClass) {
        list.push_back(ptr);
        pooled = true;
      }
    } catch (const std::bad_alloc&) {
      pooled = false;  // no room to pool it: free it instead
    }
    live_.erase(found);
    // A block that is not pooled goes back to the host allocator it came
    // from, which holds it live at exactly (class_bytes, block_align).
    if (!pooled) (void)backing_.release(ptr, live.class_bytes, live.block_align);
    return AllocationReleaseOutcome::complete(ReleaseAccounting::eager(bytes));
  }

  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    (void)release(ptr, bytes, align);
  }
  DeviceKey device() const noexcept override { return DeviceKey::host(); }

 private:
  static constexpr std::size_t kSmallestClass = 16;
  static constexpr std::size_t kLargestClass = std::size_t{1} << 20;
  static constexpr std::size_t kSmallestBlockAlign = 16;
  static constexpr std::size_t kMaxFreePerClass = 64;

  struct Live {
    Requested requested;
    std::size_t class_bytes;  // 0: not pooled, a block of exactly `requested`
    std::size_t block_align;
  };

  [[nodiscard]] bool remember(void* ptr, Live live) noexcept {
    try {
      const std::lock_guard lock(mutex_);
      live_.emplace(address_of(ptr), live);
      return true;
    } catch (const std::bad_alloc&) {
      return false;
    }
  }

  std::mutex mutex_;
  std::unordered_map<std::uintptr_t, Live> live_;
  std::map<std::pair<std::size_t, std::size_t>, std::vector<void*>> free_;
  // Declared last so it is destroyed first: it frees every block, live or pooled.
  host::HostAllocator backing_;
};

// ---- 6. control:quarantines-partial ----
//
// Choice: an EAGER allocator (no virtual backing, no shared mapping) whose
// release is a multi-step teardown of its mapping, one 64 KiB chunk at a
// time and then the address reservation, and which declares fault injection
// at kReleaseUnmap only. Permitted by ALLOC-019 (a release that changed
// something without disposing of everything returns Quarantined) together
// with the adapter contract (FaultInjection::arm may answer false for a point
// the adapter does not have), and ALLOC-017 (unmapped_bytes may be non-zero
// for an eager allocator: these bytes really lose their mapping).
//
// A quarantine happens ONLY under an injected fault: ALLOC-016 requires every
// release to be Complete when no fault is injected, so a policy of
// quarantining some allocations is not permitted. Under a fault:
//   - the first step failing changes nothing: Failed, still live (ALLOC-018);
//   - a later chunk failing: Quarantined, partially-unmapped, accounting with
//     the bytes actually unmapped, residual retaining the still-mapped bytes;
//   - the final reservation step failing: Quarantined, quarantined (nothing
//     mapped any more), retained 0 — the reference VMM's shape.
// Released chunks are replaced by PROT_NONE reservations in one atomic mmap,
// so a quarantined range is never reissued to a later allocation.
using ReleaseFaults = mechanism::FaultPlan<cts::FaultPoint, 4>;

class QuarantinesPartial final : public DeviceAllocator {
 public:
  explicit QuarantinesPartial(std::shared_ptr<ReleaseFaults> faults) : faults_(std::move(faults)) {}
  ~QuarantinesPartial() override {
    for (const auto& [address, region] : regions_) ::munmap(reinterpret_cast<void*>(address), region.mapped);
  }
  QuarantinesPartial(const QuarantinesPartial&) = delete;
  QuarantinesPartial& operator=(const QuarantinesPartial&) = delete;

  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (auto bad = malformed(bytes, align)) return fail(std::move(*bad));
    const std::size_t page = page_size();
    const std::size_t slack = align > page ? align : 0;
    const std::size_t wanted = std::max<std::size_t>(bytes, 1);
    if (wanted > SIZE_MAX - (page - 1) - slack) {
      return fail(MemoryError::allocation_failed(Tier::kHost, bytes,
                                                 "the size cannot be rounded up to whole pages of " +
                                                     std::to_string(page) + " bytes: it exceeds the address space"));
    }
    const std::size_t mapped = (wanted + page - 1) / page * page;
    const std::size_t reserved = mapped + slack;
    void* base = ::mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
      const int error = errno;
      return fail(MemoryError::allocation_failed(
          Tier::kHost, bytes, "mmap of " + std::to_string(reserved) + " bytes failed: " + std::strerror(error)));
    }
    std::uintptr_t address = address_of(base);
    if (slack != 0) {  // trim to an `align`-aligned window of `mapped` bytes
      const std::uintptr_t aligned = (address + (align - 1)) & ~(std::uintptr_t{align} - 1);
      if (aligned > address) ::munmap(base, aligned - address);
      const std::uintptr_t end = address + reserved;
      if (end > aligned + mapped) ::munmap(reinterpret_cast<void*>(aligned + mapped), end - (aligned + mapped));
      address = aligned;
    }
    try {
      const std::lock_guard lock(mutex_);
      regions_.emplace(address, Region{{bytes, align}, mapped, false});
    } catch (const std::bad_alloc&) {
      ::munmap(reinterpret_cast<void*>(address), mapped);
      return fail(no_room_for_record(bytes));
    }
    return reinterpret_cast<void*>(address);
  }

  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    const std::lock_guard lock(mutex_);
    const auto found = regions_.find(address_of(ptr));
    if (found == regions_.end() || found->second.retired) return not_live("this chunked allocator");
    Region& region = found->second;
    if (region.requested.bytes != bytes || region.requested.align != align) {
      return mismatched(region.requested.bytes, region.requested.align, bytes, align);
    }
    const std::uintptr_t address = found->first;
    std::uint64_t unmapped = 0;
    for (std::size_t offset = 0; offset < region.mapped; offset += kChunk) {
      const std::size_t length = std::min(kChunk, region.mapped - offset);
      if (faulted() || ::mmap(reinterpret_cast<void*>(address + offset), length, PROT_NONE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED) {
        if (unmapped == 0) {
          return AllocationReleaseOutcome::failed("unmapping the first chunk failed; nothing was changed");
        }
        region.retired = true;  // never live again, its range never reissued
        return AllocationReleaseOutcome::quarantined(
            {bytes, unmapped},
            {AllocationReleaseState::kPartiallyUnmapped, QuarantineReason::of(QuarantineReason::Kind::kPartialRelease),
             region.mapped - unmapped, address, align});
      }
      unmapped += length;
    }
    if (faulted() || ::munmap(reinterpret_cast<void*>(address), region.mapped) != 0) {
      region.retired = true;  // nothing mapped, but the reservation is still held
      return AllocationReleaseOutcome::quarantined(
          {bytes, unmapped}, {AllocationReleaseState::kQuarantined,
                              QuarantineReason::of(QuarantineReason::Kind::kPartialRelease), 0, address, align});
    }
    regions_.erase(found);
    return AllocationReleaseOutcome::complete({bytes, unmapped});
  }

  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    (void)release(ptr, bytes, align);
  }
  DeviceKey device() const noexcept override { return DeviceKey::host(); }

 private:
  static constexpr std::size_t kChunk = std::size_t{64} << 10;

  struct Region {
    Requested requested;
    std::size_t mapped;  // page-rounded size of the window at the key address
    bool retired;        // a release failed part way: kept reserved, never live again
  };

  [[nodiscard]] bool faulted() noexcept {
    if (!faults_->should_fail(cts::FaultPoint::kReleaseUnmap)) return false;
    errno = EIO;
    return true;
  }

  const std::shared_ptr<ReleaseFaults> faults_;
  std::mutex mutex_;
  std::map<std::uintptr_t, Region> regions_;
};

// Fault injection at the one point QuarantinesPartial has.
class ReleaseFaultInjection final : public cts::FaultInjection {
 public:
  explicit ReleaseFaultInjection(std::shared_ptr<ReleaseFaults> plan) : plan_(std::move(plan)) {}
  bool arm(cts::FaultPoint point, std::uint64_t nth) override {
    if (point != cts::FaultPoint::kReleaseUnmap) return false;  // no commit, decommit or prefix map here
    plan_->clear();
    plan_->fail_nth(point, nth);
    return true;
  }
  void clear() override { plan_->clear(); }

 private:
  std::shared_ptr<ReleaseFaults> plan_;
};

// ---- 7. control:over-aligned ----
//
// Choice: every address is aligned to at least 4096 bytes, whatever alignment
// was asked for. Permitted by ALLOC-005, which requires only that the address
// be a multiple of the requested alignment (4096 is a multiple of every
// smaller power of two). The allocator remembers the request as made, so a
// release must still name the requested (bytes, align) exactly (ALLOC-020):
// releasing with align 4096 an allocation asked for at align 8 is Failed. A
// size that is valid for the request but cannot be padded to 4096 is the
// mechanism's own refusal (allocation-failed), not the caller's error.
class OverAligned final : public DeviceAllocator {
 public:
  static constexpr std::size_t kMinimumAlignment = 4096;

  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (auto bad = malformed(bytes, align)) return fail(std::move(*bad));
    const std::size_t block_align = std::max(align, kMinimumAlignment);
    if (bytes > SIZE_MAX - (block_align - 1)) {
      return fail(MemoryError::allocation_failed(Tier::kHost, bytes,
                                                 "the size cannot be padded to this mechanism's " +
                                                     std::to_string(kMinimumAlignment) +
                                                     "-byte alignment: it exceeds the address space"));
    }
    auto ptr = backing_.allocate(bytes, block_align);
    if (!ptr) return fail(for_request(ptr.error(), bytes));
    try {
      const std::lock_guard lock(mutex_);
      live_.emplace(address_of(*ptr), Requested{bytes, align});
    } catch (const std::bad_alloc&) {
      (void)backing_.release(*ptr, bytes, block_align);
      return fail(no_room_for_record(bytes));
    }
    return ptr;
  }

  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    const std::lock_guard lock(mutex_);
    const auto found = live_.find(address_of(ptr));
    if (found == live_.end()) return not_live("this over-aligning allocator");
    if (found->second.bytes != bytes || found->second.align != align) {
      return mismatched(found->second.bytes, found->second.align, bytes, align);
    }
    auto outcome = backing_.release(ptr, bytes, std::max(align, kMinimumAlignment));
    if (outcome.is_complete()) live_.erase(found);
    return outcome;
  }

  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    (void)release(ptr, bytes, align);
  }
  DeviceKey device() const noexcept override { return DeviceKey::host(); }

 private:
  std::mutex mutex_;
  std::unordered_map<std::uintptr_t, Requested> live_;
  host::HostAllocator backing_;
};

// ---- 9. control:zero-byte-distinct ----
//
// Choice: allocate(0, align) is served with a distinct, aligned, non-null
// address that has NO memory behind it: it lies in a PROT_NONE reservation,
// so touching it faults. Permitted by ALLOC-007 (the first of its answers:
// a non-null, aligned address whose release(ptr, 0, align) is Complete) and
// ALLOC-006 (a zero-byte range [p, p) holds no byte, so it overlaps nothing;
// the addresses are still distinct from every other live allocation). The
// reference instead hands out a real one-byte heap block. Alignments above
// the arena's, or a full arena, fall back to the reference. Non-zero requests
// are the reference HostAllocator's.
class ZeroByteDistinct final : public DeviceAllocator {
 public:
  ZeroByteDistinct() {
    void* reservation = ::mmap(nullptr, kReservation, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reservation != MAP_FAILED) {
      reservation_ = reservation;
      base_ = (address_of(reservation) + (kArenaAlign - 1)) & ~(std::uintptr_t{kArenaAlign} - 1);
    }
  }
  ~ZeroByteDistinct() override {
    if (reservation_ != nullptr) ::munmap(reservation_, kReservation);
  }
  ZeroByteDistinct(const ZeroByteDistinct&) = delete;
  ZeroByteDistinct& operator=(const ZeroByteDistinct&) = delete;

  Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override {
    if (bytes != 0 || reservation_ == nullptr || !is_valid_alignment(align) || align > kArenaAlign) {
      return reference_.allocate(bytes, align);
    }
    {
      const std::lock_guard lock(mutex_);
      const std::size_t step = std::max(align, kSlot);
      for (std::size_t offset = 0; offset < kArenaBytes; offset += step) {
        if (zero_.contains(offset)) continue;
        try {
          zero_.emplace(offset, align);
        } catch (const std::bad_alloc&) {
          break;  // the reference can still serve it
        }
        return reinterpret_cast<void*>(base_ + offset);
      }
    }
    return reference_.allocate(0, align);  // arena full: a real one-byte block, as the reference does
  }

  AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    const std::uintptr_t address = address_of(ptr);
    if (reservation_ == nullptr || address < base_ || address >= base_ + kArenaBytes) {
      return reference_.release(ptr, bytes, align);
    }
    const std::lock_guard lock(mutex_);
    const auto found = zero_.find(address - base_);
    if (found == zero_.end()) return not_live("this allocator's zero-byte arena");
    if (bytes != 0 || found->second != align) return mismatched(0, found->second, bytes, align);
    zero_.erase(found);
    return AllocationReleaseOutcome::complete(ReleaseAccounting::eager(0));
  }

  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override {
    (void)release(ptr, bytes, align);
  }
  DeviceKey device() const noexcept override { return DeviceKey::host(); }

 private:
  static constexpr std::size_t kArenaBytes = std::size_t{1} << 20;
  static constexpr std::size_t kArenaAlign = std::size_t{64} << 10;  // the largest alignment the arena serves
  static constexpr std::size_t kReservation = kArenaBytes + kArenaAlign;
  static constexpr std::size_t kSlot = 16;

  void* reservation_ = nullptr;
  std::uintptr_t base_ = 0;
  std::mutex mutex_;
  std::map<std::size_t, std::size_t> zero_;  // offset in the arena -> requested alignment
  host::HostAllocator reference_;
};

// ---- 11./12. control:virtual-backing-only, control:shared-mapping-only ----
//
// Choice: an allocator offering exactly one of the two capabilities. Permitted
// by ALLOC-012 (MAY: "virtual backing, shared mapping, both or neither, and
// the presence of one never implies or excludes the other"). The reference
// shapes are neither (host) and both (host-vmm); these are the other two. Each
// is the reference HostVirtualAllocator with one capability not exposed: the
// allocator is its own capability (self-contained, ALLOC-011), and discovery
// answers the same every time (ALLOC-010). commits_on_demand() stays false,
// which ALLOC-013 allows even with virtual backing.
//
// Note for shared-mapping-only: with no virtual backing, every allocation is
// fully committed by allocate(), so commit_shared_prefix always refuses the
// target as already committed (SM-005). That is conformant; whether the kit can
// exercise SM-003/004/007/008/009 without VB is the question this control asks.
class VirtualBackingOnly final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  SharedMapping* as_shared_mapping() noexcept override { return nullptr; }
};

class SharedMappingOnly final : public ForwardingVmm {
 public:
  using ForwardingVmm::ForwardingVmm;
  VirtualBacking* as_virtual_backing() noexcept override { return nullptr; }
};

// ---- 3. control:no-pin-count ----
//
// Choice: the context declines to count its pins: outstanding_pins() is
// nullopt. Permitted by the adapter contract ("the exact number of outstanding
// pins, when the implementation can tell"); PIN-006 and PIN-009 constrain what
// teardown observes, not that a count be published. The pins and teardown are
// the reference's, so the count is still exact inside (PIN-009) and teardown
// still observes it (PIN-006); only the window onto it is closed.
class NoPinCount final : public HostContextUnderTest {
 public:
  using HostContextUnderTest::HostContextUnderTest;
  std::optional<std::uint64_t> outstanding_pins() const override { return std::nullopt; }
};

// ---- 8. control:non-waiting-teardown ----
//
// Choice: teardown never waits. With a pin alive it reports busy at once,
// whatever the deadline; once the last pin is gone it completes. Permitted by
// PIN-006 ("whether it waits or reports busy"; "it completes, or can be
// completed by trying again, once the last pin is destroyed"). PIN-007 (SHOULD)
// constrains only a teardown that waits, and PIN-008 is met trivially: a
// teardown on a thread holding a pin returns unfinished immediately.
// (Replaces control:no-double-release-detection, see the top of this file.)
class NonWaitingTeardown final : public HostContextUnderTest {
 public:
  using HostContextUnderTest::HostContextUnderTest;
  bool teardown(std::chrono::steady_clock::time_point) override { return reference()->try_teardown().has_value(); }
};

// ---- 10. control:detects-self-pinned-teardown ----
//
// Choice: teardown recognises that the calling thread took one of the
// context's still-outstanding pins and refuses at once instead of waiting for
// the deadline. Permitted by PIN-008 (the first of its answers: "either
// detects this and refuses"); the reference takes the second (it returns
// unfinished when the deadline passes). The pin source wraps each reference
// pin in a claim that remembers the thread that took it. Refusing is always
// safe: a pin taken on this thread that is still outstanding is alive, so
// teardown could not have completed anyway (PIN-006), even if the pin has
// since travelled to another thread (a queue). Without such a pin, teardown is
// the reference's waiting teardown with its deadline (PIN-007).
class PinHolders {
 public:
  [[nodiscard]] bool add(std::thread::id holder) noexcept {
    try {
      const std::lock_guard lock(mutex_);
      ++held_[holder];
      return true;
    } catch (const std::bad_alloc&) {
      return false;
    }
  }
  void remove(std::thread::id holder) noexcept {
    const std::lock_guard lock(mutex_);
    if (auto found = held_.find(holder); found != held_.end() && --found->second == 0) held_.erase(found);
  }
  [[nodiscard]] bool held_by(std::thread::id holder) const noexcept {
    const std::lock_guard lock(mutex_);
    return held_.contains(holder);
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::thread::id, std::uint64_t> held_;
};

// One counted claim: the reference pin plus the thread that took it. The
// reference pin stays the thing teardown counts; this only adds the holder.
class HolderClaim final : public PinAnchor {
 public:
  HolderClaim(ProviderContextPin&& inner, std::shared_ptr<PinHolders> holders, std::thread::id holder) noexcept
      : inner_(std::move(inner)), holders_(std::move(holders)), holder_(holder) {}
  ProviderContextIdentity context() const noexcept override { return inner_.context(); }
  void release_pin() noexcept override {
    holders_->remove(holder_);
    inner_.reset();
    delete this;
  }

 private:
  ~HolderClaim() = default;
  ProviderContextPin inner_;
  std::shared_ptr<PinHolders> holders_;
  std::thread::id holder_;
};

class HolderTrackingPins final : public ProviderContextPinSource {
 public:
  HolderTrackingPins(std::shared_ptr<mechanism::ProviderContext> inner, std::shared_ptr<PinHolders> holders)
      : inner_(std::move(inner)), holders_(std::move(holders)) {}
  ProviderContextIdentity context() const noexcept override { return inner_->context(); }
  Expected<ProviderContextPin, ProviderContextPinError> pin() noexcept override {
    auto pin = inner_->pin();  // refusals (context-unavailable, overflow) are the reference's
    if (!pin) return pin;
    const std::thread::id holder = std::this_thread::get_id();
    // Without room to track it, the pin stays the plain reference pin: still
    // counted, and teardown falls back to waiting until its deadline.
    if (!holders_->add(holder)) return pin;
    auto* claim = new (std::nothrow) HolderClaim(std::move(*pin), holders_, holder);
    if (claim == nullptr) {
      holders_->remove(holder);
      return pin;
    }
    return ProviderContextPin::adopt_counted_claim(*claim);
  }

 private:
  std::shared_ptr<mechanism::ProviderContext> inner_;
  std::shared_ptr<PinHolders> holders_;
};

class DetectsSelfPinnedTeardown final : public HostContextUnderTest {
 public:
  DetectsSelfPinnedTeardown(ProviderContextIdentity identity, ContextOptions options)
      : HostContextUnderTest(identity, options), holders_(std::make_shared<PinHolders>()),
        source_(std::make_shared<HolderTrackingPins>(reference(), holders_)) {}
  ProviderContextPinSource& pins() override { return *source_; }
  std::shared_ptr<ProviderContextPinSource> shared_pins() override { return source_; }
  bool teardown(std::chrono::steady_clock::time_point deadline) override {
    reference()->begin_retirement();                                  // teardown retires first, as the reference's does
    if (holders_->held_by(std::this_thread::get_id())) return false;  // it would wait on itself: refuse
    return reference()->teardown(deadline).has_value();
  }

 private:
  std::shared_ptr<PinHolders> holders_;
  std::shared_ptr<HolderTrackingPins> source_;
};

// ---- 4. control:unbounded-queue ----
//
// Choice: the queue is unbounded: capacity() is nullopt and it never refuses
// as full, whatever capacity the suite suggests in QueueOptions. Permitted by
// DQ-005 and DQ-011, which bound only "a bounded queue" ("full (the queue is
// bounded and at capacity)"); an unbounded queue that says so honestly is not
// bounded. Everything else is the reference mechanism::FencedDeferredQueue.
class UnboundedQueue final : public HostQueueUnderTest {
 public:
  UnboundedQueue(std::shared_ptr<ProviderContextPinSource> context, QueueOptions)
      : HostQueueUnderTest(std::move(context), QueueOptions{}) {}
};

// ---- 5. control:bounded-queue ----
//
// Choice: the queue is always bounded, small by default: the capacity the
// suite asks for, or 4 when it asks for none. Permitted by DQ-005 (a bounded
// queue at capacity refuses with full, handing back the very request) and
// DQ-011 (pending() never exceeds capacity()); DQ-006 ranks full last. The
// reference queue is unbounded unless asked; a test that enqueues more than 4
// requests without asking for a capacity must expect "full" as a permitted
// answer (the registry then quarantines with enqueue-rejected(full), DQ-007).
class BoundedQueue final : public HostQueueUnderTest {
 public:
  static constexpr std::size_t kDefaultCapacity = 4;
  BoundedQueue(std::shared_ptr<ProviderContextPinSource> context, QueueOptions options)
      : HostQueueUnderTest(std::move(context), QueueOptions{options.capacity.value_or(kDefaultCapacity)}) {}
};

// ---- 13. control:polls-on-enqueue ----
//
// Choice: enqueue opportunistically executes whatever is already ready: after
// accepting a request it runs one non-blocking poll, which executes, in FIFO
// order, the requests at the head whose fences have already passed (possibly
// the new one, if no device work is outstanding). Permitted by DQ-001 (execute
// no earlier than the fence is observed complete: a passed fence is observed),
// DQ-002 (FIFO, exactly once: the reference poll), DQ-004 (enqueue waits for
// no device work or fence: the poll only reads the stream's completion and
// returns at once, 0 if another poll is executing) and DQ-003 (the registry
// calls enqueue with no lock held, so an allocator call from it is safe, as
// LOCK-002 requires of callbacks). A request whose fence is still pending is
// held exactly as the reference holds it (DQ-008, DQ-009).
class PollsOnEnqueue final : public QueueUnderTest, public DeferredReleaseQueue {
 public:
  PollsOnEnqueue(std::shared_ptr<ProviderContextPinSource> context, QueueOptions options)
      : stream_(std::make_shared<mechanism::HostStream>()),
        inner_(std::move(context), stream_, mechanism::FencedDeferredQueue::Options{options.capacity}) {}

  // QueueUnderTest.
  DeferredReleaseQueue& queue() override { return *this; }
  void record_use() override { (void)stream_->submit(); }
  void signal_fences() override { stream_->complete_all(); }
  std::size_t drain() override { return inner_.poll(); }
  void close() override { inner_.close(); }
  void mark_device_lost() override { (void)inner_.mark_device_lost(); }
  std::optional<std::size_t> capacity() const override { return inner_.capacity(); }

  // DeferredReleaseQueue.
  Expected<ProviderContextPin, ProviderContextPinError> pin_context() noexcept override { return inner_.pin_context(); }
  Expected<DeferredEnqueued, DeferredEnqueueError> enqueue(PreparedAllocationRelease&& request,
                                                           ProviderContextPin pin) noexcept override {
    auto accepted = inner_.enqueue(std::move(request), std::move(pin));
    if (accepted) (void)inner_.poll();
    return accepted;
  }
  std::size_t pending() const noexcept override { return inner_.pending(); }

 private:
  std::shared_ptr<mechanism::HostStream> stream_;
  mechanism::FencedDeferredQueue inner_;
};

// ---- Adapters. ----

class QuarantinesPartialAdapter final : public RenamedHostAdapter {
 public:
  QuarantinesPartialAdapter(std::string name, std::string vendor)
      : RenamedHostAdapter(std::move(name), std::move(vendor)) {}
  cts::AdapterInfo info() const override {
    auto info = RenamedHostAdapter::info();
    info.capabilities.insert(cts::Capability::kFaultInjection);
    return info;
  }
  std::shared_ptr<DeviceAllocator> make_allocator() override { return std::make_shared<QuarantinesPartial>(plan_); }
  cts::FaultInjection* faults() override { return &faults_; }

 private:
  std::shared_ptr<ReleaseFaults> plan_ = std::make_shared<ReleaseFaults>();
  ReleaseFaultInjection faults_{plan_};
};

template <class Allocator>
class SingleCapabilityAdapter final : public RenamedHostAdapter {
 public:
  SingleCapabilityAdapter(std::string name, cts::Capability capability, std::set<cts::FaultPoint> points)
      : RenamedHostAdapter(std::move(name), kKnownGood), capability_(capability), faults_(plan_, std::move(points)) {}
  cts::AdapterInfo info() const override {
    auto info = RenamedHostAdapter::info();
    info.capabilities.insert({capability_, cts::Capability::kFaultInjection});
    return info;
  }
  std::shared_ptr<DeviceAllocator> make_allocator() override {
    return std::make_shared<Allocator>(
        scoped_to_context(*host::HostVirtualAllocator::create({.granularity = 0, .faults = plan_})));
  }
  cts::FaultInjection* faults() override { return &faults_; }

 private:
  cts::Capability capability_;
  std::shared_ptr<host::SyscallFaults> plan_ = std::make_shared<host::SyscallFaults>();
  SyscallFaultInjection faults_;
};

template <class Variant>
void add(const std::string& name) {
  register_variant<Variant>(name, kKnownGood);
}

}  // namespace

void register_control_adapters() {
  add<WithAllocator<RefusesZeroBytes>>("control:refuses-zero-bytes");
  add<WithAllocator<PooledReuse>>("control:pooled-reuse");
  add<WithContext<NoPinCount>>("control:no-pin-count");
  add<WithQueue<UnboundedQueue>>("control:unbounded-queue");
  add<WithQueue<BoundedQueue>>("control:bounded-queue");
  add<QuarantinesPartialAdapter>("control:quarantines-partial");
  add<WithAllocator<OverAligned>>("control:over-aligned");
  add<WithContext<NonWaitingTeardown>>("control:non-waiting-teardown");
  add<WithAllocator<ZeroByteDistinct>>("control:zero-byte-distinct");
  add<WithContext<DetectsSelfPinnedTeardown>>("control:detects-self-pinned-teardown");
  cts::register_adapter("control:virtual-backing-only", [] {
    return std::make_unique<SingleCapabilityAdapter<VirtualBackingOnly>>(
        "control:virtual-backing-only", cts::Capability::kVirtualBacking,
        std::set<cts::FaultPoint>{cts::FaultPoint::kReleaseUnmap, cts::FaultPoint::kCommit,
                                  cts::FaultPoint::kDecommit});
  });
  cts::register_adapter("control:shared-mapping-only", [] {
    // No commit or decommit without virtual backing, and no prefix map can
    // succeed (every target is fully committed), so only release can fault.
    return std::make_unique<SingleCapabilityAdapter<SharedMappingOnly>>(
        "control:shared-mapping-only", cts::Capability::kSharedMapping,
        std::set<cts::FaultPoint>{cts::FaultPoint::kReleaseUnmap});
  });
  add<WithQueue<PollsOnEnqueue>>("control:polls-on-enqueue");
}

}  // namespace ortmem::adapters::controls
