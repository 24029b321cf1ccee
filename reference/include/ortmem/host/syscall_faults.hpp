// ortmem/host/syscall_faults.hpp: the fault plan of the host virtual
// allocator, which routes every mmap, munmap, mprotect and madvise through
// one. An armed call fails with EIO instead of reaching the kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "ortmem/mechanism/fault_plan.hpp"

namespace ortmem::host {

enum class Syscall : std::uint8_t { kMmap = 0, kMunmap = 1, kMprotect = 2, kMadvise = 3 };
inline constexpr std::size_t kSyscallKinds = 4;

[[nodiscard]] std::string_view syscall_name(Syscall kind) noexcept;
[[nodiscard]] std::optional<Syscall> syscall_named(std::string_view name) noexcept;

using SyscallFaults = mechanism::FaultPlan<Syscall, kSyscallKinds>;

}  // namespace ortmem::host
