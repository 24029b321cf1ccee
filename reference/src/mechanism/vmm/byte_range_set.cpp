#include "ortmem/mechanism/vmm/byte_range_set.hpp"

#include <algorithm>
#include <iterator>

namespace ortmem::vmm {

void ByteRangeSet::add(std::size_t begin, std::size_t end) {
  if (begin >= end) return;
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second >= begin) {
    --it;
    begin = it->first;
    end = std::max(end, it->second);
    it = ranges_.erase(it);
  }
  while (it != ranges_.end() && it->first <= end) {
    end = std::max(end, it->second);
    it = ranges_.erase(it);
  }
  ranges_.emplace(begin, end);
}

void ByteRangeSet::remove(std::size_t begin, std::size_t end) {
  if (begin >= end) return;
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin()) --it;
  while (it != ranges_.end() && it->first < end) {
    const auto [first, last] = *it;
    if (last <= begin) {
      ++it;
      continue;
    }
    it = ranges_.erase(it);
    if (first < begin) ranges_.emplace(first, begin);
    if (last > end) it = std::next(ranges_.emplace(end, last).first);
  }
}

bool ByteRangeSet::intersects(std::size_t begin, std::size_t end) const {
  if (begin >= end) return false;
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second > begin) return true;
  return it != ranges_.end() && it->first < end;
}

}  // namespace ortmem::vmm
