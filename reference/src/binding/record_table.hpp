// record_table.hpp (internal): a mechanism's live allocation records, in
// shards that each have their own lock.
//
// Why shards: with one lock per mechanism, every allocate and release of
// every thread serialises on it and two threads run slower than one. A new
// record goes to the shard of the calling thread, so threads that allocate
// and release their own memory never share a lock or a cache line; a record
// released by another thread is found through the slot its metadata carries.
//
// Why slots in chunks: a record is a fixed 48 bytes in an array that only
// grows by whole chunks (never moved, never rehashed), so bookkeeping per
// live allocation is the record itself and lookup is an index, whatever the
// number of live allocations. Freed slots are reused through a free list.
//
// Each shard's lock guards its slots and its live, queued and active counts.
// The table never takes another lock and never calls out while holding one.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "ortmem/binding.hpp"
#include "ortmem/detail/spin_lock.hpp"
#include "ortmem/detail/thread_annotations.hpp"
#include "ortmem/identity.hpp"

namespace ortmem::detail {

// What a live record must match: a handle whose address, size or alignment
// differ from the record is stale, whatever its generation says.
struct AllocationRecord {
  BindingId binding;
  std::uintptr_t address;
  std::size_t bytes;
  std::size_t align;
};

class alignas(64) RecordShard {
 public:
  RecordShard() = default;
  RecordShard(const RecordShard&) = delete;
  RecordShard& operator=(const RecordShard&) = delete;

  // Guards everything below; held only for bookkeeping. A spin lock: a shard
  // is its thread's own, so the lock is nearly always free.
  SpinLock guard;

  // The record at `index` if it is live under `generation`, else null.
  [[nodiscard]] const AllocationRecord* find(std::uint32_t index, std::uint64_t generation) const noexcept
      ORTMEM_REQUIRES(guard);
  // Stores a record; empty when the host is out of memory (nothing changed).
  [[nodiscard]] std::optional<std::uint32_t> insert(std::uint64_t generation, const AllocationRecord& record) noexcept
      ORTMEM_REQUIRES(guard);
  // Frees a slot that find() returned.
  void erase(std::uint32_t index) noexcept ORTMEM_REQUIRES(guard);
  // Drops every record (the memory they describe is gone).
  void clear() noexcept ORTMEM_REQUIRES(guard);
  [[nodiscard]] std::size_t live() const noexcept ORTMEM_REQUIRES(guard) { return live_; }

  // Generations for the records this shard stores, handed out under the
  // lock; refilled from the registry's issuer kGenerationBlock at a time.
  IdentityBlock generations ORTMEM_GUARDED_BY(guard);
  static constexpr std::uint64_t kGenerationBlock = 256;

  // Prepared releases taken from this shard that have not settled (each is
  // also an active operation of the mechanism). Raised in the step that takes
  // the record; lowered when the request settles, after everything the
  // settlement records.
  std::size_t queued ORTMEM_GUARDED_BY(guard) = 0;

  // Operations opened by this shard's threads that have not finished (see
  // ActiveOperation). Raised under the lock in the step that reads the
  // lifecycle, so a confirmation that saw device-lost and then reads this
  // count under the same lock misses no operation that was let in.
  std::size_t active ORTMEM_GUARDED_BY(guard) = 0;

 private:
  struct Slot {
    std::uint64_t generation;  // 0 while free: no issued generation is 0
    AllocationRecord record;   // record.address links the free list while free
  };
  static_assert(sizeof(Slot) == 48);
  static constexpr std::uint32_t kChunkSlots = 1024;
  static constexpr std::uint32_t kNoSlot = UINT32_MAX;

  [[nodiscard]] Slot& slot(std::uint32_t index) const noexcept ORTMEM_REQUIRES(guard) {
    return chunks_[index / kChunkSlots][index % kChunkSlots];
  }

  std::vector<std::unique_ptr<Slot[]>> chunks_ ORTMEM_GUARDED_BY(guard);
  std::uint32_t used_ ORTMEM_GUARDED_BY(guard) = 0;  // slots ever handed out; below chunks_.size() * kChunkSlots
  std::uint32_t free_ ORTMEM_GUARDED_BY(guard) = kNoSlot;
  std::size_t live_ ORTMEM_GUARDED_BY(guard) = 0;
};

class RecordTable {
 public:
  static constexpr std::uint32_t kShards = 16;

  [[nodiscard]] RecordShard& shard(std::uint32_t index) noexcept { return shards_[index % kShards]; }
  // The shard new records of the calling thread go to.
  [[nodiscard]] static std::uint32_t home_shard() noexcept;

  [[nodiscard]] std::array<RecordShard, kShards>& shards() noexcept { return shards_; }

 private:
  std::array<RecordShard, kShards> shards_;
};

}  // namespace ortmem::detail
