// ortmem/cuda/cuda_event_fences.hpp: mechanism::StreamFences over CUDA events.
//
// A fence is an event (timing disabled, so recording is cheap) recorded on
// the stream; querying it is cudaEventQuery, which never blocks. Events are
// pooled: a discarded one is recorded again later rather than destroyed,
// because event creation is far slower than a release.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "ortmem/mechanism/stream_fences.hpp"

namespace ortmem::cuda {

class CudaEventFences final : public mechanism::StreamFences {
 public:
  // `stream` is a cudaStream_t (null: the legacy default stream) of device `ordinal`.
  CudaEventFences(int ordinal, void* stream) noexcept : ordinal_(ordinal), stream_(stream) {}
  ~CudaEventFences() override;
  CudaEventFences(const CudaEventFences&) = delete;
  CudaEventFences& operator=(const CudaEventFences&) = delete;

  [[nodiscard]] Expected<mechanism::FenceToken, std::string> record() noexcept override;
  [[nodiscard]] mechanism::FenceState query(mechanism::FenceToken fence) noexcept override;
  void discard(mechanism::FenceToken fence) noexcept override;

 private:
  const int ordinal_;
  void* const stream_;
  std::mutex mutex_;
  std::vector<void*> idle_;  // cudaEvent_t ready for reuse
};

}  // namespace ortmem::cuda
