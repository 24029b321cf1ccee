// published_count.hpp (internal): a count written under a lock and read
// without it.
#pragma once

#include <atomic>
#include <cstddef>

namespace ortmem::detail {

// A count that only its shard's lock holder writes and that a snapshot reads
// without the lock. Writes are release stores and reads acquire loads, so a
// reader that sees a request leave one count also sees it in the count it
// moved to, provided the writer raises the new count before it lowers the
// old one and the reader reads the old one first (see Mechanism::snapshot).
class PublishedCount {
 public:
  void raise() noexcept { value_.store(value_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  void lower() noexcept { value_.store(value_.load(std::memory_order_relaxed) - 1, std::memory_order_release); }
  void reset() noexcept { value_.store(0, std::memory_order_release); }
  [[nodiscard]] std::size_t read() const noexcept { return value_.load(std::memory_order_acquire); }

 private:
  std::atomic<std::size_t> value_{0};
};

}  // namespace ortmem::detail
