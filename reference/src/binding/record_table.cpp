#include "record_table.hpp"

#include <new>

namespace ortmem::detail {

bool RecordShard::add_chunk() noexcept {
  // An index is below kNoSlot (the one that means "none"), so the shard
  // stops one chunk short of 2^32 slots: treated as out of memory.
  if (capacity_ > kNoSlot - kChunkSlots) return false;
  try {
    chunks_.push_back(std::make_unique_for_overwrite<Slot[]>(kChunkSlots));
  } catch (const std::bad_alloc&) {
    return false;
  }
  capacity_ += kChunkSlots;
  return true;
}

void RecordShard::clear() noexcept {
  chunks_.clear();
  used_ = 0;
  capacity_ = 0;
  free_ = kNoSlot;
  live_.reset();
}

}  // namespace ortmem::detail
