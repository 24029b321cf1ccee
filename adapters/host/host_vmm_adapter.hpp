// adapters/host/host_vmm_adapter.hpp: the host virtual-memory reference as an
// adapter ("host-vmm"): HostVirtualAllocator (virtual backing and shared
// mapping over mmap and memfd), the host context and queue, and fault
// injection through a SyscallFaults plan.
#pragma once

#include <memory>
#include <optional>
#include <set>

#include "ortmem/cts/adapter.hpp"
#include "ortmem/host/syscall_faults.hpp"

namespace ortmem::adapters {

// Registers "host-vmm" (page granularity) and "host-vmm-2m" (2 MiB granules,
// the size CUDA uses).
void register_host_vmm_adapters();

// The kit's fault points armed as failures of the system call behind each:
// munmap for a release's unmap, mprotect for commit and decommit, mmap for a
// prefix map, madvise for a decommit's giving back of pages. A commit's
// mprotect grants access and maps in one step, so there is no access grant of
// its own to fail. Adapters built on HostVirtualAllocator share it, so a
// fault means the same thing in each. With `points`, only those points can be
// armed (the others are refused, as an adapter without them must refuse).
class SyscallFaultInjection final : public cts::FaultInjection {
 public:
  explicit SyscallFaultInjection(std::shared_ptr<host::SyscallFaults> plan,
                                 std::optional<std::set<cts::FaultPoint>> points = std::nullopt);
  bool arm(cts::FaultPoint point, std::uint64_t nth) override;
  void clear() override;

 private:
  static std::optional<host::Syscall> syscall_behind(cts::FaultPoint point);
  std::shared_ptr<host::SyscallFaults> plan_;
  std::optional<std::set<cts::FaultPoint>> points_;
};

}  // namespace ortmem::adapters
