#include "simulated_vmm_adapter.hpp"

#include "driver_write_probe.hpp"
#include "host/host_adapter.hpp"
#include "ortmem/cts/adapter_registry.hpp"
#include "ortmem/cuda/cuda_virtual_allocator.hpp"
#include "ortmem/cuda/testing/simulated_vmm_driver.hpp"
#include "ortmem/mechanism/fenced_deferred_queue.hpp"
#include "ortmem/mechanism/host_stream.hpp"
#include "ortmem/mechanism/testing/fault_injecting_fences.hpp"

namespace ortmem::adapters {
namespace {

// 64 KiB: several granules per test stay cheap, and it differs from the page
// size, so granule arithmetic that confuses the two is caught.
constexpr std::size_t kSimulatedGranularity = std::size_t{64} << 10;

// The simulated events as the kit fails and counts them.
class SimulatedEventFaults final : public cts::FenceFaults {
 public:
  explicit SimulatedEventFaults(std::shared_ptr<mechanism::testing::FaultInjectingFences> events)
      : events_(std::move(events)) {}
  void refuse_records(bool refuse) override { events_->refuse_records(refuse); }
  void break_fences() override { events_->break_fences(); }
  std::uint64_t calls() const override { return events_->calls(); }

 private:
  const std::shared_ptr<mechanism::testing::FaultInjectingFences> events_;
};

// The event-fenced CUDA queue, its events simulated by a host stream.
class SimulatedEventQueue final : public cts::QueueUnderTest {
 public:
  SimulatedEventQueue(std::shared_ptr<ProviderContextPinSource> context, cts::QueueOptions options)
      : queue_(std::move(context), events_, mechanism::FencedDeferredQueue::Options{options.capacity}) {}

  DeferredReleaseQueue& queue() override { return queue_; }
  void record_use() override { (void)stream_->submit(); }
  void signal_fences() override { stream_->complete_all(); }
  std::size_t drain() override { return queue_.poll(); }
  void close() override { queue_.close(); }
  void mark_device_lost() override { (void)queue_.mark_device_lost(); }
  std::optional<std::size_t> capacity() const override { return queue_.capacity(); }
  std::shared_ptr<cts::FenceFaults> fence_faults() const override { return faults_; }

 private:
  std::shared_ptr<mechanism::HostStream> stream_ = std::make_shared<mechanism::HostStream>();
  std::shared_ptr<mechanism::testing::FaultInjectingFences> events_ =
      std::make_shared<mechanism::testing::FaultInjectingFences>(stream_);
  std::shared_ptr<cts::FenceFaults> faults_ = std::make_shared<SimulatedEventFaults>(events_);
  mechanism::FencedDeferredQueue queue_;
};

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
  return std::make_unique<SimulatedEventQueue>(dynamic_cast<HostContextUnderTest&>(context).shared_pins(), options);
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
