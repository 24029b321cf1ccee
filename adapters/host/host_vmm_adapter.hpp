// adapters/host/host_vmm_adapter.hpp: the host virtual-memory reference as an
// adapter ("host-vmm"): HostVirtualAllocator (virtual backing and shared
// mapping over mmap and memfd), the host context and queue, and fault
// injection through a SyscallFaults plan.
#pragma once

namespace ortmem::adapters {

// Registers "host-vmm" (page granularity) and "host-vmm-2m" (2 MiB granules,
// the size CUDA uses).
void register_host_vmm_adapters();

}  // namespace ortmem::adapters
