// ortmem/detail/record_slot.hpp: where a mechanism keeps one live record.
//
// Metadata carries the slot of its record so the registry finds the record
// without hashing. The slot is only a hint: the record there is trusted only
// when its generation (and binding, address, size and alignment) match the
// metadata, so a slot reused by a later allocation makes old metadata stale,
// never current, and an out-of-range slot is simply stale.
#pragma once

#include <cstdint>

namespace ortmem::detail {

struct RecordSlot {
  std::uint32_t shard = 0;
  std::uint32_t index = 0;
};

}  // namespace ortmem::detail
