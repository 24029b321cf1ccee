// ortmem/host/syscall_faults.hpp: a plan that makes the Nth system call of a
// kind fail, so partial failures can be tested deterministically.
//
// The host virtual allocator routes every mmap, munmap, mprotect and madvise
// through one plan. A plan is shared (one per adapter) and thread-safe: each
// call of a kind takes the next number of that kind, and the call whose
// number was armed fails with EIO instead of reaching the kernel.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ortmem::host {

enum class Syscall : std::uint8_t { kMmap = 0, kMunmap = 1, kMprotect = 2, kMadvise = 3 };
inline constexpr std::size_t kSyscallKinds = 4;

[[nodiscard]] std::string_view syscall_name(Syscall kind) noexcept;
[[nodiscard]] std::optional<Syscall> syscall_named(std::string_view name) noexcept;

class SyscallFaults {
 public:
  // The `nth` call of `kind` from now on (1 = the very next) fails.
  void fail_nth(Syscall kind, std::uint64_t nth) noexcept {
    auto& slot = slots_[static_cast<std::size_t>(kind)];
    slot.armed.store(slot.calls.load(std::memory_order_acquire) + nth, std::memory_order_release);
  }
  void clear() noexcept {
    for (auto& slot : slots_) slot.armed.store(0, std::memory_order_release);
  }
  // Counts one call of `kind`; true when this call must fail.
  [[nodiscard]] bool should_fail(Syscall kind) noexcept {
    auto& slot = slots_[static_cast<std::size_t>(kind)];
    const std::uint64_t number = slot.calls.fetch_add(1, std::memory_order_acq_rel) + 1;
    return number == slot.armed.load(std::memory_order_acquire);
  }

 private:
  struct Slot {
    std::atomic<std::uint64_t> calls{0};
    std::atomic<std::uint64_t> armed{0};  // 0: nothing armed
  };
  std::array<Slot, kSyscallKinds> slots_;
};

}  // namespace ortmem::host
