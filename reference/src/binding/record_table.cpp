#include "record_table.hpp"

#include <new>

#include "ortmem/detail/thread_slot.hpp"

namespace ortmem::detail {

std::uint32_t RecordShard::insert(std::uint64_t generation, const AllocationRecord& record) noexcept {
  std::uint32_t index = free_;
  if (index != kNoSlot) {
    free_ = static_cast<std::uint32_t>(slot(index).record.address);
  } else {
    if (used_ == kNoSlot) return kNoSlot;  // 2^32 - 1 slots in one shard: treated as out of memory
    if (used_ == chunks_.size() * kChunkSlots) {
      try {
        chunks_.push_back(std::make_unique_for_overwrite<Slot[]>(kChunkSlots));
      } catch (const std::bad_alloc&) {
        return kNoSlot;
      }
    }
    index = used_++;
  }
  slot(index) = Slot{generation, record};
  live_.raise();
  return index;
}

void RecordShard::clear() noexcept {
  chunks_.clear();
  used_ = 0;
  free_ = kNoSlot;
  live_.reset();
}

std::uint32_t RecordTable::home_shard() noexcept { return thread_slot() % kShards; }

}  // namespace ortmem::detail
