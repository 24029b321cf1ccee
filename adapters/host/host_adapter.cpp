#include "host_adapter.hpp"

#include <cstring>

#include "ortmem/cts/adapter_registry.hpp"
#include "ortmem/host/host_allocator.hpp"
#include "ortmem/host/host_deferred_queue.hpp"
#include "ortmem/host/host_provider_context.hpp"

namespace ortmem::adapters {
namespace {

using namespace ortmem::cts;

class HostContext final : public ContextUnderTest {
 public:
  HostContext(ProviderContextIdentity identity, ContextOptions options)
      : context_(std::make_shared<host::HostProviderContext>(
            identity, host::HostProviderContext::Options{
                          options.max_outstanding_pins.value_or(host::HostProviderContext::kCounterCapacity)})) {}

  ProviderContextPinSource& pins() override { return *context_; }
  std::optional<std::uint64_t> outstanding_pins() const override { return context_->outstanding_pins(); }
  void begin_retirement() override { context_->begin_retirement(); }
  bool teardown(std::chrono::steady_clock::time_point deadline) override {
    return context_->teardown(deadline).has_value();
  }
  void mark_device_lost() override { context_->mark_device_lost(); }

  [[nodiscard]] const std::shared_ptr<host::HostProviderContext>& shared() const { return context_; }

 private:
  std::shared_ptr<host::HostProviderContext> context_;
};

class HostQueue final : public QueueUnderTest {
 public:
  HostQueue(std::shared_ptr<host::HostProviderContext> context, QueueOptions options)
      : stream_(std::make_shared<host::HostStream>()),
        queue_(std::move(context), stream_, host::HostDeferredReleaseQueue::Options{options.capacity}) {}

  DeferredReleaseQueue& queue() override { return queue_; }
  void record_use() override { (void)stream_->submit(); }
  void signal_fences() override { stream_->complete_all(); }
  std::size_t drain() override { return queue_.poll(); }
  void close() override { queue_.close(); }
  void mark_device_lost() override { (void)queue_.mark_device_lost(); }
  std::optional<std::size_t> capacity() const override { return queue_.capacity(); }

 private:
  std::shared_ptr<host::HostStream> stream_;
  host::HostDeferredReleaseQueue queue_;
};

class HostMemory final : public MemoryAccess {
 public:
  void fill(void* ptr, std::size_t bytes, std::uint8_t value) override { std::memset(ptr, value, bytes); }
  void read(const void* ptr, std::span<std::uint8_t> out) override { std::memcpy(out.data(), ptr, out.size()); }
};

class HostAdapter final : public Adapter {
 public:
  AdapterInfo info() const override {
    return AdapterInfo{
        .name = "host",
        .version = "0.1.0",
        .vendor = "ortmem-cts reference",
        .device = DeviceKey::host(),
        .capabilities = {Capability::kContextPins, Capability::kDeferredQueue},
    };
  }
  Availability available() const override { return {}; }
  std::shared_ptr<DeviceAllocator> make_allocator() override { return std::make_shared<host::HostAllocator>(); }
  std::unique_ptr<ContextUnderTest> make_context(ProviderContextIdentity identity, ContextOptions options) override {
    return std::make_unique<HostContext>(identity, options);
  }
  std::unique_ptr<QueueUnderTest> make_queue(ContextUnderTest& context, QueueOptions options) override {
    return std::make_unique<HostQueue>(dynamic_cast<HostContext&>(context).shared(), options);
  }
  MemoryAccess& memory() override { return memory_; }

 private:
  HostMemory memory_;
};

}  // namespace

void register_host_adapter() {
  register_adapter("host", [] { return std::make_unique<HostAdapter>(); });
}

}  // namespace ortmem::adapters
