// ortmem/detail/thread_slot.hpp (internal): which shard of a sharded count
// the calling thread writes.
//
// Threads take slots in turn, so a handful of threads each get a shard of
// their own and write no cache line another thread writes. The slot is fixed
// for the thread's life; callers reduce it modulo their shard count.
#pragma once

#include <atomic>
#include <cstdint>

namespace ortmem::detail {

[[nodiscard]] inline std::uint32_t thread_slot() noexcept {
  // Constant-initialised and filled on first use, rather than initialised by
  // an expression: a thread_local with a dynamic initialiser is reached
  // through a guard call on every access, on a path that runs per pin.
  constexpr std::uint32_t kUnassigned = UINT32_MAX;
  thread_local std::uint32_t slot = kUnassigned;
  if (slot == kUnassigned) [[unlikely]] {
    static std::atomic<std::uint32_t> next{0};
    slot = next.fetch_add(1, std::memory_order_relaxed) % kUnassigned;
  }
  return slot;
}

}  // namespace ortmem::detail
