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
// Each shard's lock guards its slots and every write of its live, queued and
// active counts; a snapshot reads the counts without it (PublishedCount).
// The table never takes another lock and never calls out while holding one.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ortmem/binding.hpp"
#include "ortmem/detail/spin_lock.hpp"
#include "ortmem/detail/thread_annotations.hpp"
#include "ortmem/detail/thread_slot.hpp"
#include "ortmem/identity.hpp"
#include "published_count.hpp"

namespace ortmem::detail {

// What a live record must match: a handle whose address, size or alignment
// differ from the record is stale, whatever its generation says.
struct AllocationRecord {
  BindingId binding;
  std::uintptr_t address;
  std::size_t bytes;
  std::size_t align;
};

// The record that an allocation of `binding` at `ptr` is live under.
[[nodiscard]] inline AllocationRecord record_of(BindingId binding, const void* ptr, std::size_t bytes,
                                                std::size_t align) noexcept {
  return {binding, reinterpret_cast<std::uintptr_t>(ptr), bytes, align};
}

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
      ORTMEM_REQUIRES(guard) {
    // Metadata is never trusted for more than a hint: an index past what was
    // handed out, or a slot now holding another generation, is stale.
    if (index >= used_ || generation == 0) return nullptr;
    const Slot& found = slot(index);
    return found.generation == generation ? &found.record : nullptr;
  }
  // Stores a record and returns its index, or kNoSlot when the host is out of
  // memory (nothing changed). A plain index, not an optional: an optional
  // returned through memory is written in two parts and read back as one
  // word, and that read waits for both stores to retire on every allocation.
  [[nodiscard]] std::uint32_t insert(std::uint64_t generation, const AllocationRecord& record) noexcept
      ORTMEM_REQUIRES(guard) {
    std::uint32_t index = free_;
    if (index != kNoSlot) {
      free_ = static_cast<std::uint32_t>(slot(index).record.address);
    } else {
      if (used_ == capacity_ && !add_chunk()) return kNoSlot;
      index = used_++;
    }
    slot(index) = Slot{generation, record};
    live_.raise();
    return index;
  }
  static constexpr std::uint32_t kNoSlot = UINT32_MAX;
  // Frees a slot that find() returned.
  void erase(std::uint32_t index) noexcept ORTMEM_REQUIRES(guard) {
    Slot& freed = slot(index);
    freed.generation = 0;
    freed.record.address = free_;
    free_ = index;
    live_.lower();
  }
  // Drops every record (the memory they describe is gone).
  void clear() noexcept ORTMEM_REQUIRES(guard);
  // Written under the lock; read with or without it.
  [[nodiscard]] const PublishedCount& live() const noexcept { return live_; }

  // Generations for the records this shard stores, handed out under the
  // lock; refilled from the registry's issuer kGenerationBlock at a time.
  IdentityBlock generations ORTMEM_GUARDED_BY(guard);
  static constexpr std::uint64_t kGenerationBlock = 256;

  // Prepared releases taken from this shard that have not settled (each is
  // also an active operation of the mechanism). Raised in the step that takes
  // the record; lowered when the request settles, after everything the
  // settlement records. Written only under the lock.
  PublishedCount queued;

  // The reference count that handles of records made in this shard hold on
  // their mechanism: a box holding one reference to it, whose own count the
  // handles share (see Mechanism::make). Set when the mechanism is made,
  // cleared when everything but handles has let go of it.
  std::shared_ptr<const void> handle_anchor ORTMEM_GUARDED_BY(guard);

  // Operations opened by this shard's threads that have not finished (see
  // ActiveOperation). Raised under the lock in the step that reads the
  // lifecycle, so a confirmation that saw device-lost and then reads this
  // count under the same lock misses no operation that was let in. Written
  // only under the lock.
  PublishedCount active;

 private:
  struct Slot {
    std::uint64_t generation;  // 0 while free: no issued generation is 0
    AllocationRecord record;   // record.address links the free list while free
  };
  static_assert(sizeof(Slot) == 48);
  static constexpr std::uint32_t kChunkSlots = 1024;

  // One more chunk of free slots; false when the host has no memory for it,
  // or the shard has all the slots an index below kNoSlot can name.
  [[nodiscard, gnu::cold]] bool add_chunk() noexcept ORTMEM_REQUIRES(guard);
  [[nodiscard]] Slot& slot(std::uint32_t index) const noexcept ORTMEM_REQUIRES(guard) {
    return chunks_[index / kChunkSlots][index % kChunkSlots];
  }

  std::vector<std::unique_ptr<Slot[]>> chunks_ ORTMEM_GUARDED_BY(guard);
  std::uint32_t used_ ORTMEM_GUARDED_BY(guard) = 0;      // slots ever handed out; at most capacity_
  std::uint32_t capacity_ ORTMEM_GUARDED_BY(guard) = 0;  // chunks_.size() * kChunkSlots; never kNoSlot
  std::uint32_t free_ ORTMEM_GUARDED_BY(guard) = kNoSlot;
  PublishedCount live_;  // written only under the lock
};

class RecordTable {
 public:
  static constexpr std::uint32_t kShards = 16;

  [[nodiscard]] RecordShard& shard(std::uint32_t index) noexcept { return shards_[index % kShards]; }
  // The shard new records of the calling thread go to.
  [[nodiscard]] static std::uint32_t home_shard() noexcept { return thread_slot() % kShards; }
  // The calling thread's shard, marked in use before anything is counted in
  // it: a shard that was never in use holds nothing, so an unlocked reader
  // reads only the shards in use, and a quiet mechanism used by one thread
  // costs it one shard. The mark is written once per shard, so the word
  // stays in every reader's cache.
  [[nodiscard]] RecordShard& home_in_use(std::uint32_t home) noexcept {
    const std::uint32_t bit = std::uint32_t{1} << home;
    if ((in_use_.load(std::memory_order_relaxed) & bit) == 0) in_use_.fetch_or(bit, std::memory_order_release);
    return shards_[home];
  }
  // Calls fn(shard) for each shard marked in use.
  template <class Fn>
  void for_each_in_use(Fn&& fn) const {
    for (std::uint32_t left = in_use_.load(std::memory_order_acquire); left != 0; left &= left - 1) {
      fn(shards_[static_cast<std::uint32_t>(__builtin_ctz(left))]);
    }
  }

  [[nodiscard]] std::array<RecordShard, kShards>& shards() noexcept { return shards_; }

 private:
  std::atomic<std::uint32_t> in_use_{0};  // bit i: shards_[i] was a home shard
  std::array<RecordShard, kShards> shards_;
};

}  // namespace ortmem::detail
