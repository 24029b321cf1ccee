// adapters/cuda/simulated_vmm_adapter.hpp: "cuda-vmm-simulated", a TEST
// adapter: CudaVirtualAllocator over SimulatedVmmDriver (host mmap standing
// in for the CUDA driver) and the event-fenced mechanism::FencedDeferredQueue over
// FaultInjectingFences (a host stream standing in for CUDA events), with the host
// context.
//
// It certifies the CUDA virtual-memory state machine on machines with no GPU
// and proves nothing about a device; only the test runner registers it.
// SM-008's write probe asks the simulated driver for the mapping's access,
// as the real adapter asks cuMemGetAccess, so the device's probe is proven
// here (the simulated driver's record is what mprotect enforces).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/driver_fault_injection.hpp"
#include "host/host_adapter.hpp"
#include "ortmem/cuda/testing/simulated_vmm_driver.hpp"

namespace ortmem::adapters {

class SimulatedVmmAdapter : public HostAdapter {
 public:
  explicit SimulatedVmmAdapter(std::string name = "cuda-vmm-simulated",
                               std::string vendor = "ortmem-cts test double (no GPU)")
      : name_(std::move(name)), vendor_(std::move(vendor)) {}
  cts::AdapterInfo info() const override;
  std::shared_ptr<DeviceAllocator> make_allocator() override;
  std::unique_ptr<cts::QueueUnderTest> make_queue(cts::ContextUnderTest& context, cts::QueueOptions options) override;
  cts::FaultInjection* faults() override { return &faults_; }
  cts::MemoryAccess& memory() override { return memory_; }

 protected:
  // The driver under one allocator (a known-bad variant wraps it).
  [[nodiscard]] virtual std::shared_ptr<cuda::VmmDriver> driver_over(
      std::shared_ptr<cuda::testing::SimulatedVmmDriver> driver);

 private:
  // Host bytes, and the drivers' record of every mapping's access.
  class Memory final : public cts::MemoryAccess {
   public:
    void fill(void* ptr, std::size_t bytes, std::uint8_t value) override { bytes_.fill(ptr, bytes, value); }
    void read(const void* ptr, std::span<std::uint8_t> out) override { bytes_.read(ptr, out); }
    cts::WriteProbe probe_write(void* ptr, std::uint8_t value) override;
    void add(std::weak_ptr<cuda::VmmDriver> driver);

   private:
    HostMemory bytes_;
    std::mutex mutex_;
    std::vector<std::weak_ptr<cuda::VmmDriver>> drivers_;
  };

  std::string name_;
  std::string vendor_;
  DriverFaultInjection faults_{std::make_shared<cuda::DriverFaults>()};
  Memory memory_;
};

void register_simulated_vmm_adapter();

}  // namespace ortmem::adapters
