// ortmem/cuda/cuda_allocator.hpp: the reference eager CUDA allocator.
//
// Device memory comes from the runtime: stream-ordered (cudaMallocAsync and
// cudaFreeAsync on the allocator's own stream) where the device supports
// memory pools, cudaMalloc and cudaFree otherwise. The stream is a blocking
// one, so work on the legacy default stream (cudaMemcpy) is ordered after an
// allocation and before its free.
//
// Alignments above the runtime's own (256 bytes) are honoured by
// over-allocating; zero-byte requests get a distinct block. Every live block
// is recorded, so a release of an unknown block or with the wrong size or
// alignment is Failed with nothing changed. A free the runtime refuses is
// mapped to an honest outcome by release_outcome_after_free().
//
// Thread-safe. Errors are left with the runtime's per-thread state cleared,
// so a failure here never surfaces in an unrelated later call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ortmem/allocator.hpp"

namespace ortmem::cuda {

// The outcome of a release whose record was found and whose free returned
// `runtime_error` (a cudaError_t): Complete on success; Failed only when the
// runtime refused the arguments before touching anything; Quarantined as
// device-lost when the device or its context is gone; Quarantined otherwise,
// because then nobody can say what the free did.
[[nodiscard]] AllocationReleaseOutcome release_outcome_after_free(int runtime_error, std::uint64_t bytes,
                                                                  std::uintptr_t address, std::size_t align);

class CudaAllocator final : public DeviceAllocator {
 public:
  // Fails with the reason when the device cannot be used.
  [[nodiscard]] static Expected<std::shared_ptr<CudaAllocator>, MemoryError> create(int ordinal);
  // Frees no block (what is left may be quarantined); does not wait for the device.
  ~CudaAllocator() override;

  [[nodiscard]] Expected<void*, MemoryError> allocate(std::size_t bytes, std::size_t align) noexcept override;
  [[nodiscard]] AllocationReleaseOutcome release(void* ptr, std::size_t bytes, std::size_t align) noexcept override;
  void deallocate(void* ptr, std::size_t bytes, std::size_t align) noexcept override;
  [[nodiscard]] DeviceKey device() const noexcept override {
    return DeviceKey::device(static_cast<std::uint32_t>(ordinal_));
  }

  [[nodiscard]] bool stream_ordered() const noexcept { return stream_ != nullptr; }
  [[nodiscard]] std::size_t live_allocations() const noexcept;

 private:
  struct Records;  // the live blocks and their lock (cuda_allocator.cpp)
  CudaAllocator(int ordinal, void* stream);
  [[nodiscard]] int free_block(void* base) noexcept;

  const int ordinal_;
  void* const stream_;  // cudaStream_t; null when the device has no memory pools
  const std::unique_ptr<Records> records_;
};

}  // namespace ortmem::cuda
