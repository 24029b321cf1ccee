#include "host_adapter.hpp"

#include <cstring>

#include "ortmem/cts/adapter_registry.hpp"
#include "ortmem/host/host_allocator.hpp"
#include "ortmem/mechanism/host_stream.hpp"

namespace ortmem::adapters {

HostContextUnderTest::HostContextUnderTest(ProviderContextIdentity identity, cts::ContextOptions options)
    : ReferenceContextUnderTest(std::make_shared<mechanism::ProviderContext>(
          identity, mechanism::ProviderContext::Options{
                        options.max_outstanding_pins.value_or(mechanism::ProviderContext::kCounterCapacity)})) {}

namespace {

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

}  // namespace

HostQueueUnderTest::HostQueueUnderTest(std::shared_ptr<ProviderContextPinSource> context, cts::QueueOptions options,
                                       Fences fences)
    : stream_(std::make_shared<mechanism::HostStream>()),
      events_(fences == Fences::kSimulatedEvents ? std::make_shared<mechanism::testing::FaultInjectingFences>(stream_)
                                                 : nullptr),
      queue_(std::move(context), events_ ? std::shared_ptr<mechanism::StreamFences>(events_) : stream_,
             mechanism::FencedDeferredQueue::Options{options.capacity}) {}

std::shared_ptr<cts::FenceFaults> HostQueueUnderTest::fence_faults() const {
  return events_ ? std::make_shared<SimulatedEventFaults>(events_) : nullptr;
}

// Empty spans may carry null pointers, which memset and memcpy must never see.
void HostMemory::fill(void* ptr, std::size_t bytes, std::uint8_t value) {
  if (bytes != 0) std::memset(ptr, value, bytes);
}

void HostMemory::read(const void* ptr, std::span<std::uint8_t> out) {
  if (!out.empty()) std::memcpy(out.data(), ptr, out.size());
}

cts::AdapterInfo HostAdapter::info() const {
  return cts::AdapterInfo{
      .name = "host",
      .version = "0.1.0",
      .vendor = "ortmem-cts reference",
      .device = DeviceKey::host(),
      .capabilities = {cts::Capability::kContextPins, cts::Capability::kDeferredQueue},
  };
}

std::shared_ptr<DeviceAllocator> HostAdapter::make_allocator() {
  return scoped_to_context(std::make_shared<host::HostAllocator>());
}

std::unique_ptr<cts::ContextUnderTest> HostAdapter::make_context(ProviderContextIdentity identity,
                                                                 cts::ContextOptions options) {
  return std::make_unique<HostContextUnderTest>(identity, options);
}

std::unique_ptr<cts::QueueUnderTest> HostAdapter::make_queue(cts::ContextUnderTest& context,
                                                             cts::QueueOptions options) {
  return std::make_unique<HostQueueUnderTest>(dynamic_cast<HostContextUnderTest&>(context).shared_pins(), options);
}

void register_host_adapter() {
  cts::register_adapter("host", [] { return std::make_unique<HostAdapter>(); });
}

}  // namespace ortmem::adapters
