// ortmem/mechanism/vmm/byte_range_set.hpp: the bytes of one allocation a caller has
// committed, as disjoint half-open ranges.
//
// Virtual-backing allocators map whole granules but callers commit bytes.
// Keeping the bytes (not the granules) is what lets two ranges that share a
// granule keep it mapped until both are decommitted (VB-005): a granule may
// be unmapped only when no committed byte lies in it.
#pragma once

#include <cstddef>
#include <map>

namespace ortmem::vmm {

class ByteRangeSet {
 public:
  // Adds [begin, end), merging with touching or overlapping ranges.
  void add(std::size_t begin, std::size_t end);
  // Removes [begin, end); ranges straddling an edge are cut.
  void remove(std::size_t begin, std::size_t end);
  // Whether any byte of [begin, end) is in the set.
  [[nodiscard]] bool intersects(std::size_t begin, std::size_t end) const;
  [[nodiscard]] bool empty() const noexcept { return ranges_.empty(); }
  [[nodiscard]] const std::map<std::size_t, std::size_t>& ranges() const noexcept { return ranges_; }

  friend bool operator==(const ByteRangeSet&, const ByteRangeSet&) = default;

 private:
  std::map<std::size_t, std::size_t> ranges_;  // begin -> end, disjoint and not touching
};

}  // namespace ortmem::vmm
