// adapters/cuda/simulated_vmm_adapter.hpp: "cuda-vmm-simulated", a TEST
// adapter: CudaVirtualAllocator over SimulatedVmmDriver (host mmap standing
// in for the CUDA driver) and the event-fenced CudaDeferredReleaseQueue over
// HostStreamFences (a host stream standing in for CUDA events), with the host
// context.
//
// It certifies the CUDA virtual-memory state machine on machines with no GPU
// and proves nothing about a device; only the test runner registers it.
#pragma once

namespace ortmem::adapters {

void register_simulated_vmm_adapter();

}  // namespace ortmem::adapters
