// adapters/cuda/cuda_adapter.hpp: the CUDA reference as adapters.
//
//   "cuda"      eager CudaAllocator (stream-ordered where the device has
//               memory pools), CudaProviderContext pins and the event-fenced
//               CudaDeferredReleaseQueue. Profiles: core, pins, deferred.
//   "cuda-vmm"  CudaVirtualAllocator on the device's driver, with the same
//               context and queue, and a driver fault plan. All profiles.
//
// Bytes are filled and read with cudaMemset and cudaMemcpy. Work "that uses
// the memory" is a host function on the context's stream that waits for
// signal_fences(), so a fence stays pending exactly until the suite says so.
//
// Without a usable device both adapters register and say why they cannot run
// ("no CUDA device: ..."); the runner exits 2 with that reason.
#pragma once

namespace ortmem::adapters {

void register_cuda_adapters();

}  // namespace ortmem::adapters
