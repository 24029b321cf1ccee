#include "ortmem/cuda/cuda_device.hpp"

#include <cuda_runtime_api.h>

namespace ortmem::cuda {

std::string runtime_error_name(int error) {
  const auto code = static_cast<cudaError_t>(error);
  return std::string(cudaGetErrorName(code)) + " (" + cudaGetErrorString(code) + ")";
}

Expected<CudaDeviceInfo, std::string> probe_cuda_device(int ordinal) noexcept {
  try {
    CudaDeviceInfo info;
    info.ordinal = ordinal;
    cudaRuntimeGetVersion(&info.runtime_version);
    cudaDriverGetVersion(&info.driver_version);  // leaves 0 when no driver is loaded
    int count = 0;
    if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
      (void)cudaGetLastError();  // the probe's error must not surface in a later call
      std::string reason = "no CUDA device: cudaGetDeviceCount failed with " + runtime_error_name(error);
      if (info.driver_version == 0) reason += "; no NVIDIA driver is loaded on this machine";
      return fail(std::move(reason));
    }
    if (ordinal < 0 || ordinal >= count) {
      return fail("no CUDA device at ordinal " + std::to_string(ordinal) + ": this machine has " +
                  std::to_string(count));
    }
    cudaDeviceProp properties{};
    if (const cudaError_t error = cudaGetDeviceProperties(&properties, ordinal); error != cudaSuccess) {
      return fail("no CUDA device usable at ordinal " + std::to_string(ordinal) + ": " + runtime_error_name(error));
    }
    info.name = properties.name;
    info.compute_major = properties.major;
    info.compute_minor = properties.minor;
    int pools = 0;
    cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, ordinal);
    info.memory_pools = pools != 0;
    return info;
  } catch (const std::bad_alloc&) {
    return fail(std::string("no CUDA device: out of host memory while probing"));
  }
}

}  // namespace ortmem::cuda
