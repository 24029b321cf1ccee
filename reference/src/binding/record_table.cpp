#include "record_table.hpp"

#include <atomic>
#include <new>

namespace ortmem::detail {

const AllocationRecord* RecordShard::find(std::uint32_t index, std::uint64_t generation) const noexcept {
  // Metadata is never trusted for more than a hint: an index past what was
  // handed out, or a slot now holding another generation, is stale.
  if (index >= used_ || generation == 0) return nullptr;
  const Slot& found = slot(index);
  return found.generation == generation ? &found.record : nullptr;
}

std::optional<std::uint32_t> RecordShard::insert(std::uint64_t generation, const AllocationRecord& record) noexcept {
  std::uint32_t index = free_;
  if (index != kNoSlot) {
    free_ = static_cast<std::uint32_t>(slot(index).record.address);
  } else {
    if (used_ == kNoSlot) return std::nullopt;  // 2^32 - 1 slots in one shard: treated as out of memory
    if (used_ == chunks_.size() * kChunkSlots) {
      try {
        chunks_.push_back(std::make_unique_for_overwrite<Slot[]>(kChunkSlots));
      } catch (const std::bad_alloc&) {
        return std::nullopt;
      }
    }
    index = used_++;
  }
  slot(index) = Slot{generation, record};
  ++live_;
  return index;
}

void RecordShard::erase(std::uint32_t index) noexcept {
  Slot& freed = slot(index);
  freed.generation = 0;
  freed.record.address = free_;
  free_ = index;
  --live_;
}

void RecordShard::clear() noexcept {
  chunks_.clear();
  used_ = 0;
  free_ = kNoSlot;
  live_ = 0;
}

std::uint32_t RecordTable::home_shard() noexcept {
  // Threads take shards in turn, so a handful of threads each get their own.
  static std::atomic<std::uint32_t> next{0};
  thread_local const std::uint32_t home = next.fetch_add(1, std::memory_order_relaxed) % kShards;
  return home;
}

}  // namespace ortmem::detail
