// ortmem/cuda/cuda_device.hpp: whether a CUDA device can be used here, and
// if not, why, in one line a user can act on.
//
// The CUDA parts link the runtime statically and reach the driver only at
// run time, so every binary loads on a machine with no GPU and no driver;
// this probe is how they find out, before any mechanism is made.
#pragma once

#include <string>

#include "ortmem/expected.hpp"

namespace ortmem::cuda {

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;  // "NVIDIA H200"
  int compute_major = 0;
  int compute_minor = 0;
  int runtime_version = 0;    // e.g. 13000
  int driver_version = 0;     // 0 when no driver is installed
  bool memory_pools = false;  // stream-ordered allocation (cudaMallocAsync)
};

// The device at `ordinal`, or the reason it cannot be used, which always
// begins "no CUDA device" when there is none to use.
[[nodiscard]] Expected<CudaDeviceInfo, std::string> probe_cuda_device(int ordinal) noexcept;

// The runtime's name for an error code, e.g. "cudaErrorMemoryAllocation".
[[nodiscard]] std::string runtime_error_name(int error);

}  // namespace ortmem::cuda
