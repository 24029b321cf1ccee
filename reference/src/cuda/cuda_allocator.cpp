#include "ortmem/cuda/cuda_allocator.hpp"

#include <cuda_runtime_api.h>

#include <string>
#include <unordered_map>

#include "ortmem/cuda/cuda_device.hpp"
#include "ortmem/detail/lock_guard.hpp"
#include "ortmem/detail/mutex.hpp"
#include "ortmem/detail/thread_annotations.hpp"

namespace ortmem::cuda {
namespace {

// cudaMalloc's own alignment: every smaller power of two is honoured for free.
constexpr std::size_t kRuntimeAlignment = 256;

bool device_is_gone(cudaError_t error) noexcept {
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorContextIsDestroyed:
    case cudaErrorCudartUnloading:
    case cudaErrorDeviceUninitialized: return true;
    default: return false;
  }
}

MemoryError runtime_failure(std::uint64_t requested, std::string_view call, cudaError_t error) {
  return MemoryError::allocation_failed(Tier::kDevice, requested,
                                        std::string(call) + " failed with " + runtime_error_name(error));
}

}  // namespace

AllocationReleaseOutcome release_outcome_after_free(int runtime_error, std::uint64_t bytes, std::uintptr_t address,
                                                    std::size_t align) {
  const auto error = static_cast<cudaError_t>(runtime_error);
  if (error == cudaSuccess) return AllocationReleaseOutcome::complete(ReleaseAccounting::eager(bytes));
  if (error == cudaErrorInvalidValue || error == cudaErrorInvalidDevicePointer) {
    return AllocationReleaseOutcome::failed("the CUDA runtime refused the free (" + runtime_error_name(error) +
                                            ") before changing anything; the block is still live");
  }
  const bool lost = device_is_gone(error);
  return AllocationReleaseOutcome::quarantined(
      ReleaseAccounting::eager(bytes),
      ResidualOwnership{
          lost ? AllocationReleaseState::kDeviceLost : AllocationReleaseState::kQuarantined,
          QuarantineReason::of(lost ? QuarantineReason::Kind::kDeviceLost : QuarantineReason::Kind::kAllocatorRefused),
          bytes, address, align});
}

struct CudaAllocator::Records {
  struct Block {
    void* base;  // what the runtime returned; differs from the address when over-allocated
    std::size_t bytes;
    std::size_t align;
  };
  mutable detail::Mutex mutex;
  std::unordered_map<std::uintptr_t, Block> live ORTMEM_GUARDED_BY(mutex);
};

CudaAllocator::CudaAllocator(int ordinal, void* stream)
    : ordinal_(ordinal), stream_(stream), records_(std::make_unique<Records>()) {}

Expected<std::shared_ptr<CudaAllocator>, MemoryError> CudaAllocator::create(int ordinal) {
  auto device = probe_cuda_device(ordinal);
  if (!device) return fail(MemoryError::allocation_failed(Tier::kDevice, 0, device.error()));
  if (const cudaError_t error = cudaSetDevice(ordinal); error != cudaSuccess) {
    return fail(runtime_failure(0, "cudaSetDevice", error));
  }
  cudaStream_t stream = nullptr;
  if (device->memory_pools) {
    if (const cudaError_t error = cudaStreamCreate(&stream); error != cudaSuccess) {
      (void)cudaGetLastError();
      return fail(runtime_failure(0, "cudaStreamCreate", error));
    }
  }
  return std::shared_ptr<CudaAllocator>(new CudaAllocator(ordinal, stream));
}

// Frees no block: one still recorded was either never released by its owner
// or is quarantined by the registry, which must never be freed (it may still
// be in use on a stream, or its device may be gone). The context reclaims it.
CudaAllocator::~CudaAllocator() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

std::size_t CudaAllocator::live_allocations() const noexcept {
  const detail::LockGuard lock(records_->mutex);
  return records_->live.size();
}

int CudaAllocator::free_block(void* base) noexcept {
  (void)cudaSetDevice(ordinal_);
  const cudaError_t error =
      stream_ != nullptr ? cudaFreeAsync(base, static_cast<cudaStream_t>(stream_)) : cudaFree(base);
  if (error != cudaSuccess) (void)cudaGetLastError();
  return static_cast<int>(error);
}

Expected<void*, MemoryError> CudaAllocator::allocate(std::size_t bytes, std::size_t align) noexcept {
  if (!is_valid_alignment(align)) {
    return fail(MemoryError::invalid_request(Tier::kDevice, bytes,
                                             "alignment " + std::to_string(align) + " is not a power of two"));
  }
  const std::size_t slack = align > kRuntimeAlignment ? align - 1 : 0;
  const std::size_t payload = bytes == 0 ? 1 : bytes;
  if (payload > SIZE_MAX - slack) {
    return fail(MemoryError::invalid_request(Tier::kDevice, bytes,
                                             "the size overflows when padded for alignment " + std::to_string(align)));
  }
  if (const cudaError_t error = cudaSetDevice(ordinal_); error != cudaSuccess) {
    (void)cudaGetLastError();
    return fail(runtime_failure(bytes, "cudaSetDevice", error));
  }
  void* base = nullptr;
  const cudaError_t error = stream_ != nullptr
                                ? cudaMallocAsync(&base, payload + slack, static_cast<cudaStream_t>(stream_))
                                : cudaMalloc(&base, payload + slack);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return fail(runtime_failure(bytes, stream_ != nullptr ? "cudaMallocAsync" : "cudaMalloc", error));
  }
  const std::uintptr_t address = (reinterpret_cast<std::uintptr_t>(base) + slack) & ~(std::uintptr_t{align} - 1);
  try {
    const detail::LockGuard lock(records_->mutex);
    records_->live.emplace(address, Records::Block{base, bytes, align});
  } catch (const std::bad_alloc&) {
    (void)free_block(base);
    return fail(MemoryError::allocation_failed(Tier::kDevice, bytes, "out of host memory for the allocator's record"));
  }
  return reinterpret_cast<void*>(address);
}

AllocationReleaseOutcome CudaAllocator::release(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  decltype(records_->live)::node_type record;
  {
    const detail::LockGuard lock(records_->mutex);
    const auto found = records_->live.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (found == records_->live.end()) {
      return AllocationReleaseOutcome::failed(
          "the address is not a live allocation of this CUDA allocator (never allocated here, or already "
          "released); nothing was changed");
    }
    if (found->second.bytes != bytes || found->second.align != align) {
      return AllocationReleaseOutcome::failed("the allocation is live with " + std::to_string(found->second.bytes) +
                                              " bytes at alignment " + std::to_string(found->second.align) + ", not " +
                                              std::to_string(bytes) + " bytes at alignment " + std::to_string(align) +
                                              "; nothing was changed: release it with its own size and alignment");
    }
    // Taken out before the free, so no second release can match the block
    // while the runtime works; put back as it was if the free changed nothing.
    record = records_->live.extract(found);
  }
  auto outcome =
      release_outcome_after_free(free_block(record.mapped().base), bytes, reinterpret_cast<std::uintptr_t>(ptr), align);
  if (outcome.is_failed()) {
    const detail::LockGuard lock(records_->mutex);
    records_->live.insert(std::move(record));  // reuses the node: cannot run out of memory
  }
  return outcome;
}

void CudaAllocator::deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept {
  (void)release(ptr, bytes, align);
}

}  // namespace ortmem::cuda
