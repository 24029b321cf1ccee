// ortmem/cuda/cuda_provider_context.hpp: the reference provider context of
// a CUDA device: the device, the stream its work runs on, and its pins.
//
// Pins follow the mechanism layer's rules (accepting -> retiring ->
// device-lost -> terminated, counted in one atomic word, capped, refused from
// retirement on, teardown waiting for the last pin with a deadline): the
// counter is a mechanism::ProviderContext. What is CUDA here is the stream, created on the device
// and destroyed (without waiting) with the context.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "ortmem/mechanism/provider_context.hpp"

namespace ortmem::cuda {

class CudaProviderContext final : public ProviderContextPinSource {
 public:
  // Fails with the reason when the device cannot be used or has no stream to give.
  [[nodiscard]] static Expected<std::shared_ptr<CudaProviderContext>, std::string> create(
      ProviderContextIdentity identity, int ordinal, mechanism::ProviderContext::Options options = {});
  ~CudaProviderContext() override;
  CudaProviderContext(const CudaProviderContext&) = delete;
  CudaProviderContext& operator=(const CudaProviderContext&) = delete;

  [[nodiscard]] ProviderContextIdentity context() const noexcept override { return pins_.context(); }
  [[nodiscard]] Expected<ProviderContextPin, ProviderContextPinError> pin() noexcept override { return pins_.pin(); }

  [[nodiscard]] int ordinal() const noexcept { return ordinal_; }
  // The context's stream (a blocking cudaStream_t): work that uses memory runs here.
  [[nodiscard]] void* stream() const noexcept { return stream_; }

  [[nodiscard]] mechanism::ProviderContext::State state() const noexcept { return pins_.state(); }
  [[nodiscard]] std::uint64_t outstanding_pins() const noexcept { return pins_.outstanding_pins(); }
  void begin_retirement() noexcept { pins_.begin_retirement(); }
  void mark_device_lost() noexcept { pins_.mark_device_lost(); }
  [[nodiscard]] Expected<void, mechanism::TeardownBusy> teardown(
      std::chrono::steady_clock::time_point deadline) noexcept {
    return pins_.teardown(deadline);
  }

 private:
  CudaProviderContext(ProviderContextIdentity identity, int ordinal, void* stream,
                      mechanism::ProviderContext::Options options)
      : pins_(identity, options), ordinal_(ordinal), stream_(stream) {}

  mechanism::ProviderContext pins_;
  const int ordinal_;
  void* const stream_;
};

}  // namespace ortmem::cuda
