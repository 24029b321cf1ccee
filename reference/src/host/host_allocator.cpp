#include "ortmem/host/host_allocator.hpp"

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "ortmem/detail/lock_guard.hpp"
#include "ortmem/detail/spin_lock.hpp"
#include "ortmem/detail/thread_annotations.hpp"
#include "live_block_table.hpp"

namespace ortmem::host {
namespace {

// malloc's own alignment; smaller requests are served by it (and still
// honoured, since every power of two below it divides it). malloc rather than
// operator new: the nothrow operator new calls the throwing one inside an
// exception handler, which cost the raw allocate and release about 5 ns (a
// fifth of the cycle) and buys nothing when every failure is a value.
constexpr std::size_t kMallocAlignment = alignof(std::max_align_t);

// Zero-byte requests still get a distinct one-byte block, so the address is
// unique among live allocations and releasable like any other.
constexpr std::size_t storage_bytes(std::size_t bytes) noexcept { return bytes == 0 ? 1 : bytes; }

// Requires: align is a power of two. Every block, however aligned, goes back with free().
void* raw_allocate(std::size_t bytes, std::size_t align) noexcept {
  if (align <= kMallocAlignment) return std::malloc(storage_bytes(bytes));
  void* ptr = nullptr;
  return posix_memalign(&ptr, align, storage_bytes(bytes)) == 0 ? ptr : nullptr;
}

// The refusals, out of line: each builds a message, and kept inline they
// gave the two hot paths a frame sized for the strings. Each returns the
// whole result, so the caller passes its own return slot through.
[[gnu::cold, gnu::noinline]] Expected<void*, MemoryError> refuse_request(std::size_t bytes, std::size_t align) {
  if (!is_valid_alignment(align)) {
    return fail(MemoryError::invalid_request(Tier::kHost, bytes,
                                             "alignment " + std::to_string(align) + " is not a power of two"));
  }
  return fail(MemoryError::invalid_request(Tier::kHost, bytes,
                                           "the size overflows when rounded up to alignment " + std::to_string(align)));
}

[[gnu::cold, gnu::noinline]] Expected<void*, MemoryError> refuse_out_of_memory(std::size_t bytes) {
  return fail(MemoryError::allocation_failed(Tier::kHost, bytes,
                                             "the system allocator returned no memory (the process is out of "
                                             "address space or the host is out of memory)"));
}

// Requires: `ptr` came from raw_allocate and was never recorded.
[[gnu::cold, gnu::noinline]] Expected<void*, MemoryError> refuse_unrecorded(void* ptr, std::size_t bytes) {
  std::free(ptr);
  return fail(MemoryError::allocation_failed(Tier::kHost, bytes,
                                             "the host is out of memory for the allocator's own live record"));
}

[[gnu::cold, gnu::noinline]] AllocationReleaseOutcome refuse_unknown_block() {
  return AllocationReleaseOutcome::failed(
      "the address is not a live allocation of this host allocator (never allocated here, or "
      "already released); nothing was changed");
}

[[gnu::cold, gnu::noinline]] AllocationReleaseOutcome refuse_mismatch(const detail::LiveBlockTable::Block& live,
                                                                      std::size_t bytes, std::size_t align) {
  return AllocationReleaseOutcome::failed("the allocation is live with " + std::to_string(live.bytes) +
                                          " bytes at alignment " + std::to_string(live.align) + ", not " +
                                          std::to_string(bytes) + " bytes at alignment " + std::to_string(align) +
                                          "; nothing was changed: release it with its own size and alignment");
}

// The totals live in the shards, beside the records they count, so that
// threads working on different shards write no common cache line. A spin
// lock, not a mutex: the critical section is a table probe and an add, and a
// mutex's two atomic operations each way cost more than that. The one call out
// under it is the table's growth, a doubling, so it happens only a logarithmic
// number of times in a shard's life.
struct alignas(64) Shard {
  mutable detail::SpinLock lock;
  detail::LiveBlockTable live ORTMEM_GUARDED_BY(lock);
  std::uint64_t live_bytes ORTMEM_GUARDED_BY(lock) = 0;
};

}  // namespace

// The live records, split by address so that threads allocating and
// releasing different blocks rarely share a lock.
struct HostAllocator::Shards {
  static constexpr std::size_t kCount = 64;

  Shard& of(const void* ptr) noexcept {
    // Blocks are at least 16-byte aligned; mix the bits above that so neighbours spread.
    const auto address = reinterpret_cast<std::uintptr_t>(ptr) >> 4;
    return shard[(address ^ (address >> 7) ^ (address >> 13)) % kCount];
  }
  struct Totals {
    std::size_t allocations = 0;
    std::uint64_t bytes = 0;
  };
  // Sums over every shard, each read under its lock.
  Totals totals() const noexcept {
    Totals sum;
    for (const Shard& one : shard) {
      const detail::LockGuard guard(one.lock);
      sum.allocations += one.live.size();
      sum.bytes += one.live_bytes;
    }
    return sum;
  }

  std::array<Shard, kCount> shard;
};

HostAllocator::HostAllocator() : shards_(std::make_unique<Shards>()) {}

HostAllocator::~HostAllocator() {
  // A block still live here was never released by its owner or is
  // quarantined by the registry (owner dropped, enqueue refused, device
  // lost), and the allocator cannot tell which. Quarantined memory must never
  // be reissued, so none of it goes back to the heap: it is kept, reachable,
  // for the life of the process (a leak checker sees memory in use, not a leak).
  struct Abandoned {
    std::mutex mutex;
    std::vector<void*> blocks;
  };
  static auto* const abandoned = new Abandoned;
  const std::lock_guard lock(abandoned->mutex);
  for (Shard& shard : shards_->shard) {
    const detail::LockGuard shard_lock(shard.lock);
    shard.live.for_each([&](const detail::LiveBlockTable::Block& block) {
      abandoned->blocks.push_back(reinterpret_cast<void*>(block.address));
    });
  }
}

std::size_t HostAllocator::reclaim_all_after_context_destroyed() noexcept {
  std::size_t reclaimed = 0;
  for (Shard& shard : shards_->shard) {
    detail::LiveBlockTable live;
    {
      const detail::LockGuard guard(shard.lock);
      live.swap(shard.live);
      shard.live_bytes = 0;
    }
    live.for_each(
        [](const detail::LiveBlockTable::Block& block) { std::free(reinterpret_cast<void*>(block.address)); });
    reclaimed += live.size();
  }
  return reclaimed;
}

std::size_t HostAllocator::live_allocations() const noexcept { return shards_->totals().allocations; }

std::uint64_t HostAllocator::live_bytes() const noexcept { return shards_->totals().bytes; }

Expected<void*, MemoryError> HostAllocator::allocate(std::size_t bytes, std::size_t align) noexcept {
  if (!is_valid_alignment(align) || bytes > SIZE_MAX - (align - 1)) return refuse_request(bytes, align);
  void* ptr = raw_allocate(bytes, align);
  if (ptr == nullptr) return refuse_out_of_memory(bytes);
  Shard& shard = shards_->of(ptr);
  bool recorded = false;
  {
    const detail::LockGuard guard(shard.lock);
    recorded = shard.live.insert({reinterpret_cast<std::uintptr_t>(ptr), bytes, align});
    if (recorded) shard.live_bytes += bytes;
  }
  if (!recorded) return refuse_unrecorded(ptr, bytes);
  return ptr;
}

AllocationReleaseOutcome HostAllocator::release(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  Shard& shard = shards_->of(ptr);
  {
    const detail::LockGuard guard(shard.lock);
    detail::LiveBlockTable::Block* found = shard.live.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (found == nullptr) return refuse_unknown_block();
    if (found->bytes != bytes || found->align != align) return refuse_mismatch(*found, bytes, align);
    shard.live.erase(found);
    shard.live_bytes -= bytes;
  }
  // The record is gone, so no other release can match this block: free it unlocked.
  std::free(ptr);
  return AllocationReleaseOutcome::complete(ReleaseAccounting::eager(bytes));
}

void HostAllocator::deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  (void)release(ptr, bytes, align);
}

}  // namespace ortmem::host
