#include "ortmem/cuda/cuda_provider_context.hpp"

#include <cuda_runtime_api.h>

#include "ortmem/cuda/cuda_device.hpp"

namespace ortmem::cuda {

Expected<std::shared_ptr<CudaProviderContext>, std::string> CudaProviderContext::create(
    ProviderContextIdentity identity, int ordinal, mechanism::ProviderContext::Options options) {
  if (auto device = probe_cuda_device(ordinal); !device) return fail(device.error());
  if (const cudaError_t error = cudaSetDevice(ordinal); error != cudaSuccess) {
    (void)cudaGetLastError();
    return fail("cudaSetDevice(" + std::to_string(ordinal) + ") failed with " + runtime_error_name(error));
  }
  cudaStream_t stream = nullptr;
  if (const cudaError_t error = cudaStreamCreate(&stream); error != cudaSuccess) {
    (void)cudaGetLastError();
    return fail("cudaStreamCreate failed with " + runtime_error_name(error));
  }
  return std::shared_ptr<CudaProviderContext>(new CudaProviderContext(identity, ordinal, stream, options));
}

CudaProviderContext::~CudaProviderContext() {
  // Returns at once; the driver frees the stream when its work is done.
  if (pins_.state() != mechanism::ProviderContext::State::kDeviceLost) {
    (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
}

}  // namespace ortmem::cuda
