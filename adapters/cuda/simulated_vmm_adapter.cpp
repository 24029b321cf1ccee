#include "simulated_vmm_adapter.hpp"

#include "driver_fault_injection.hpp"
#include "adapters/host/host_adapter.hpp"
#include "ortmem/cts/adapter_registry.hpp"
#include "ortmem/cuda/cuda_deferred_queue.hpp"
#include "ortmem/cuda/cuda_virtual_allocator.hpp"
#include "ortmem/cuda/testing/host_stream_fences.hpp"
#include "ortmem/cuda/testing/simulated_vmm_driver.hpp"

namespace ortmem::adapters {
namespace {

// 64 KiB: several granules per test stay cheap, and it differs from the page
// size, so granule arithmetic that confuses the two is caught.
constexpr std::size_t kSimulatedGranularity = std::size_t{64} << 10;

// The event-fenced CUDA queue, its events simulated by a host stream.
class SimulatedEventQueue final : public cts::QueueUnderTest {
 public:
  SimulatedEventQueue(std::shared_ptr<ProviderContextPinSource> context, cts::QueueOptions options)
      : queue_(std::move(context), std::make_shared<cuda::testing::HostStreamFences>(stream_),
               cuda::CudaDeferredReleaseQueue::Options{options.capacity}) {}

  DeferredReleaseQueue& queue() override { return queue_; }
  void record_use() override { (void)stream_->submit(); }
  void signal_fences() override { stream_->complete_all(); }
  std::size_t drain() override { return queue_.poll(); }
  void close() override { queue_.close(); }
  void mark_device_lost() override { (void)queue_.mark_device_lost(); }
  std::optional<std::size_t> capacity() const override { return queue_.capacity(); }

 private:
  std::shared_ptr<host::HostStream> stream_ = std::make_shared<host::HostStream>();
  cuda::CudaDeferredReleaseQueue queue_;
};

class SimulatedVmmAdapter final : public HostAdapter {
 public:
  cts::AdapterInfo info() const override {
    auto info = HostAdapter::info();
    info.name = "cuda-vmm-simulated";
    info.vendor = "ortmem-cts test double (no GPU)";
    info.capabilities.insert(
        {cts::Capability::kVirtualBacking, cts::Capability::kSharedMapping, cts::Capability::kFaultInjection});
    return info;
  }
  std::shared_ptr<DeviceAllocator> make_allocator() override {
    auto driver = std::make_shared<cuda::testing::SimulatedVmmDriver>(kSimulatedGranularity);
    // The granularity is this adapter's own choice: create cannot refuse it.
    return *cuda::CudaVirtualAllocator::create(std::move(driver), {.device = DeviceKey::host(), .faults = faults_.plan()});
  }
  std::unique_ptr<cts::QueueUnderTest> make_queue(cts::ContextUnderTest& context, cts::QueueOptions options) override {
    return std::make_unique<SimulatedEventQueue>(dynamic_cast<HostContext&>(context).shared_pins(), options);
  }
  cts::FaultInjection* faults() override { return &faults_; }

 private:
  DriverFaultInjection faults_{std::make_shared<cuda::DriverFaults>()};
};

}  // namespace

void register_simulated_vmm_adapter() {
  cts::register_adapter("cuda-vmm-simulated", [] { return std::make_unique<SimulatedVmmAdapter>(); });
}

}  // namespace ortmem::adapters
