#include "ortmem/cuda/cuda_event_fences.hpp"

#include <cuda_runtime_api.h>

#include "ortmem/cuda/cuda_device.hpp"

namespace ortmem::cuda {
namespace {

cudaEvent_t as_event(mechanism::FenceToken fence) noexcept {
  return reinterpret_cast<cudaEvent_t>(static_cast<std::uintptr_t>(fence));
}

}  // namespace

CudaEventFences::~CudaEventFences() {
  for (void* event : idle_) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

Expected<mechanism::FenceToken, std::string> CudaEventFences::record() noexcept {
  try {
    cudaEvent_t event = nullptr;
    {
      const std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        event = static_cast<cudaEvent_t>(idle_.back());
        idle_.pop_back();
      }
    }
    (void)cudaSetDevice(ordinal_);
    if (event == nullptr) {
      if (const cudaError_t error = cudaEventCreateWithFlags(&event, cudaEventDisableTiming); error != cudaSuccess) {
        (void)cudaGetLastError();
        return fail("cudaEventCreateWithFlags failed with " + runtime_error_name(error));
      }
    }
    if (const cudaError_t error = cudaEventRecord(event, static_cast<cudaStream_t>(stream_)); error != cudaSuccess) {
      (void)cudaGetLastError();
      (void)cudaEventDestroy(event);
      return fail("cudaEventRecord failed with " + runtime_error_name(error));
    }
    return static_cast<mechanism::FenceToken>(reinterpret_cast<std::uintptr_t>(event));
  } catch (const std::bad_alloc&) {
    return fail(std::string("out of host memory recording a fence"));
  }
}

mechanism::FenceState CudaEventFences::query(mechanism::FenceToken fence) noexcept {
  const cudaError_t error = cudaEventQuery(as_event(fence));
  if (error == cudaSuccess) return mechanism::FenceState::kPassed;
  if (error == cudaErrorNotReady) return mechanism::FenceState::kPending;
  (void)cudaGetLastError();
  return mechanism::FenceState::kBroken;
}

void CudaEventFences::discard(mechanism::FenceToken fence) noexcept {
  try {
    const std::lock_guard lock(mutex_);
    idle_.push_back(as_event(fence));
  } catch (const std::bad_alloc&) {
    (void)cudaEventDestroy(as_event(fence));
  }
}

}  // namespace ortmem::cuda
