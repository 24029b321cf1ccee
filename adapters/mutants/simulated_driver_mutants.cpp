// adapters/mutants/simulated_driver_mutants.cpp: known-bad variants of
// cuda-vmm-simulated whose fault is in the driver calls the CUDA mechanism
// makes, where only a probe that asks the driver (not the allocator) sees it.
#include <memory>
#include <string>

#include "cuda/simulated_vmm_adapter.hpp"
#include "host/host_variant.hpp"
#include "ortmem/cts/adapter_registry.hpp"

namespace ortmem::adapters::mutants {

void register_simulated_driver_mutant_adapters();

namespace {

// Every call forwards to the simulated driver, except that a mapping asked to
// be read-only is made read-write: a shared prefix mapped into a target can be
// written through (SM-008), while every byte still reads as it should. This is
// the bug a CUDA allocator has when it builds one CUmemAccessDesc for all
// mappings.
class WritablePrefixDriver final : public cuda::VmmDriver {
 public:
  explicit WritablePrefixDriver(std::shared_ptr<cuda::testing::SimulatedVmmDriver> inner) : inner_(std::move(inner)) {}
  std::size_t granularity() const noexcept override { return inner_->granularity(); }
  Expected<cuda::DevicePtr, cuda::DriverFault> reserve(std::size_t bytes, std::size_t alignment) noexcept override {
    return inner_->reserve(bytes, alignment);
  }
  Expected<void, cuda::DriverFault> free_reservation(cuda::DevicePtr address, std::size_t bytes) noexcept override {
    return inner_->free_reservation(address, bytes);
  }
  Expected<cuda::PhysicalHandle, cuda::DriverFault> create(std::size_t bytes) noexcept override {
    return inner_->create(bytes);
  }
  Expected<void, cuda::DriverFault> release(cuda::PhysicalHandle handle) noexcept override {
    return inner_->release(handle);
  }
  Expected<void, cuda::DriverFault> map(cuda::DevicePtr address, std::size_t bytes,
                                        cuda::PhysicalHandle handle) noexcept override {
    return inner_->map(address, bytes, handle);
  }
  Expected<void, cuda::DriverFault> unmap(cuda::DevicePtr address, std::size_t bytes) noexcept override {
    return inner_->unmap(address, bytes);
  }
  Expected<void, cuda::DriverFault> set_access(cuda::DevicePtr address, std::size_t bytes,
                                               cuda::Access) noexcept override {
    return inner_->set_access(address, bytes, cuda::Access::kReadWrite);
  }
  Expected<std::optional<cuda::Access>, cuda::DriverFault> access(cuda::DevicePtr address) const noexcept override {
    return inner_->access(address);
  }

 private:
  std::shared_ptr<cuda::testing::SimulatedVmmDriver> inner_;
};

class WritablePrefix final : public SimulatedVmmAdapter {
 public:
  WritablePrefix(std::string name, std::string vendor) : SimulatedVmmAdapter(std::move(name), std::move(vendor)) {}

 protected:
  std::shared_ptr<cuda::VmmDriver> driver_over(std::shared_ptr<cuda::testing::SimulatedVmmDriver> driver) override {
    return std::make_shared<WritablePrefixDriver>(std::move(driver));
  }
};

}  // namespace

void register_simulated_driver_mutant_adapters() {
  register_variant<WritablePrefix>("mutant:cuda-sim-writable-prefix", kKnownBad);
}

}  // namespace ortmem::adapters::mutants
