// conformance/suites/support/byte_runs.hpp: what a model-based suite knows of the contents
// of a range of bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>

namespace ortmem::cts {

// Disjoint byte runs [begin, end), each with the value last written there.
class ByteRuns {
 public:
  struct Run {
    std::size_t end;
    std::uint8_t value;
  };

  void erase(std::size_t begin, std::size_t end) {
    if (begin >= end) return;
    auto it = runs_.upper_bound(begin);
    if (it != runs_.begin() && std::prev(it)->second.end > begin) --it;
    while (it != runs_.end() && it->first < end) {
      const std::size_t first = it->first;
      const Run run = it->second;
      it = runs_.erase(it);
      if (first < begin) runs_.emplace(first, Run{begin, run.value});
      if (run.end > end) {
        runs_.emplace(end, Run{run.end, run.value});
        break;
      }
    }
  }
  void assign(std::size_t begin, std::size_t end, std::uint8_t value) {
    if (begin >= end) return;
    erase(begin, end);
    runs_.emplace(begin, Run{end, value});
  }
  [[nodiscard]] bool intersects(std::size_t begin, std::size_t end) const {
    if (begin >= end) return false;
    auto it = runs_.upper_bound(begin);
    if (it != runs_.begin() && std::prev(it)->second.end > begin) return true;
    return it != runs_.end() && it->first < end;
  }
  // Calls f(begin, end, value) for each run clipped to [begin, end).
  template <class F>
  void each(std::size_t begin, std::size_t end, F f) const {
    auto it = runs_.upper_bound(begin);
    if (it != runs_.begin() && std::prev(it)->second.end > begin) --it;
    for (; it != runs_.end() && it->first < end; ++it) {
      f(std::max(it->first, begin), std::min(it->second.end, end), it->second.value);
    }
  }
  // Calls f(begin, end, value) for every run.
  template <class F>
  void each(F f) const {
    for (const auto& [begin, run] : runs_) f(begin, run.end, run.value);
  }

 private:
  std::map<std::size_t, Run> runs_;
};

// A distinct non-zero value per write, so neither a fresh page nor an older
// write can pass for it.
inline std::uint8_t value_of(unsigned write) { return static_cast<std::uint8_t>(1 + write % 251); }

}  // namespace ortmem::cts
