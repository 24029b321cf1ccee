#include "simulated_vmm_adapter.hpp"

#include "driver_fault_injection.hpp"
#include "adapters/host/host_adapter.hpp"
#include "ortmem/cts/adapter_registry.hpp"
#include "ortmem/cuda/cuda_virtual_allocator.hpp"
#include "ortmem/cuda/testing/simulated_vmm_driver.hpp"

namespace ortmem::adapters {
namespace {

// 64 KiB: several granules per test stay cheap, and it differs from the page
// size, so granule arithmetic that confuses the two is caught.
constexpr std::size_t kSimulatedGranularity = std::size_t{64} << 10;

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
  cts::FaultInjection* faults() override { return &faults_; }

 private:
  DriverFaultInjection faults_{std::make_shared<cuda::DriverFaults>()};
};

}  // namespace

void register_simulated_vmm_adapter() {
  cts::register_adapter("cuda-vmm-simulated", [] { return std::make_unique<SimulatedVmmAdapter>(); });
}

}  // namespace ortmem::adapters
