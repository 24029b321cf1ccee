#include "simulated_vmm_adapter.hpp"

#include "driver_write_probe.hpp"
#include "host/host_adapter.hpp"
#include "ortmem/cts/adapter_registry.hpp"
#include "ortmem/cuda/cuda_virtual_allocator.hpp"
#include "ortmem/cuda/testing/simulated_vmm_driver.hpp"

namespace ortmem::adapters {
namespace {

// 64 KiB: several granules per test stay cheap, and it differs from the page
// size, so granule arithmetic that confuses the two is caught.
constexpr std::size_t kSimulatedGranularity = std::size_t{64} << 10;

}  // namespace

cts::AdapterInfo SimulatedVmmAdapter::info() const {
  auto info = HostAdapter::info();
  info.name = name_;
  info.vendor = vendor_;
  info.capabilities.insert(
      {cts::Capability::kVirtualBacking, cts::Capability::kSharedMapping, cts::Capability::kFaultInjection});
  return info;
}

std::shared_ptr<DeviceAllocator> SimulatedVmmAdapter::make_allocator() {
  auto driver = driver_over(std::make_shared<cuda::testing::SimulatedVmmDriver>(kSimulatedGranularity));
  memory_.add(driver);
  // The granularity is this adapter's own choice: create cannot refuse it.
  return *cuda::CudaVirtualAllocator::create(std::move(driver),
                                             {.device = DeviceKey::host(), .faults = faults_.plan()});
}

std::unique_ptr<cts::QueueUnderTest> SimulatedVmmAdapter::make_queue(cts::ContextUnderTest& context,
                                                                     cts::QueueOptions options) {
  return std::make_unique<HostQueueUnderTest>(dynamic_cast<HostContextUnderTest&>(context).shared_pins(), options,
                                              HostQueueUnderTest::Fences::kSimulatedEvents);
}

std::shared_ptr<cuda::VmmDriver> SimulatedVmmAdapter::driver_over(
    std::shared_ptr<cuda::testing::SimulatedVmmDriver> driver) {
  return driver;
}

cts::WriteProbe SimulatedVmmAdapter::Memory::probe_write(void* ptr, std::uint8_t) {
  const std::lock_guard lock(mutex_);
  std::string tried;
  for (const auto& weak : drivers_) {
    const auto driver = weak.lock();
    if (!driver) continue;
    const cts::WriteProbe probe = probe_through_driver(*driver, ptr);
    // Each allocator has a driver of its own; only the one that mapped the
    // address has a record of it.
    if (probe.outcome != cts::WriteProbe::Outcome::kUnknown) return probe;
    tried = probe.detail;
  }
  return {cts::WriteProbe::Outcome::kUnknown, tried.empty() ? "no live simulated driver maps the address" : tried};
}

void SimulatedVmmAdapter::Memory::add(std::weak_ptr<cuda::VmmDriver> driver) {
  const std::lock_guard lock(mutex_);
  std::erase_if(drivers_, [](const auto& weak) { return weak.expired(); });
  drivers_.push_back(std::move(driver));
}

void register_simulated_vmm_adapter() {
  cts::register_adapter("cuda-vmm-simulated", [] { return std::make_unique<SimulatedVmmAdapter>(); });
}

}  // namespace ortmem::adapters
