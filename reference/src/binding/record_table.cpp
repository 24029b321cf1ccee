#include "record_table.hpp"

#include <new>

#include "ortmem/detail/thread_slot.hpp"

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
  live_.raise();
  return index;
}

void RecordShard::erase(std::uint32_t index) noexcept {
  Slot& freed = slot(index);
  freed.generation = 0;
  freed.record.address = free_;
  free_ = index;
  live_.lower();
}

void RecordShard::clear() noexcept {
  chunks_.clear();
  used_ = 0;
  free_ = kNoSlot;
  live_.reset();
}

std::uint32_t RecordTable::home_shard() noexcept { return thread_slot() % kShards; }

}  // namespace ortmem::detail
