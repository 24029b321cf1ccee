#include "cuda_adapter.hpp"

#include <cuda_runtime_api.h>

#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "driver_fault_injection.hpp"
#include "driver_write_probe.hpp"
#include "host/reference_context.hpp"
#include "ortmem/cts/adapter_registry.hpp"
#include "ortmem/cuda/cuda_allocator.hpp"
#include "ortmem/cuda/cuda_device.hpp"
#include "ortmem/cuda/cuda_event_fences.hpp"
#include "ortmem/cuda/cuda_provider_context.hpp"
#include "ortmem/cuda/cuda_virtual_allocator.hpp"
#include "ortmem/cuda/cuda_vmm_driver.hpp"
#include "ortmem/mechanism/fenced_deferred_queue.hpp"

namespace ortmem::adapters {
namespace {

constexpr int kOrdinal = 0;

// The kit's factories cannot return errors: a device that worked when
// available() was asked and fails now is a broken environment, reported by
// the runner as a failed test with this message.
[[noreturn]] void environment_broke(const std::string& what) { throw std::runtime_error(what); }

void check(cudaError_t error, const char* call) {
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    environment_broke(std::string(call) + " failed with " + cuda::runtime_error_name(error));
  }
}

using CudaContext = ReferenceContextUnderTest<cuda::CudaProviderContext>;

// Work on the stream that lasts until the suite signals it: a host function
// waiting on a gate. Host functions may block but must not call CUDA. Each
// host function holds its gate, so a queue destroyed while its stream still
// waits (after a simulated device loss, when nothing synchronizes) frees
// nothing the stream's thread is about to read.
class StreamGate {
 public:
  void open() {
    const std::lock_guard lock(mutex_);
    open_ = true;
    opened_.notify_all();
  }
  // `holder` is a heap std::shared_ptr<StreamGate>, released here.
  static void wait(void* holder) {
    const std::unique_ptr<std::shared_ptr<StreamGate>> gate(static_cast<std::shared_ptr<StreamGate>*>(holder));
    StreamGate& self = **gate;
    std::unique_lock lock(self.mutex_);
    self.opened_.wait(lock, [&] { return self.open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

class CudaQueue final : public cts::QueueUnderTest {
 public:
  CudaQueue(const std::shared_ptr<cuda::CudaProviderContext>& context, cts::QueueOptions options)
      : context_(context),
        queue_(context, std::make_shared<cuda::CudaEventFences>(context->ordinal(), context->stream()),
               mechanism::FencedDeferredQueue::Options{options.capacity}) {}
  ~CudaQueue() override {
    // Nothing may stay blocked on the stream once the queue's test is over.
    for (auto& gate : gates_) gate->open();
    if (!device_lost_) (void)cudaStreamSynchronize(stream());
  }

  DeferredReleaseQueue& queue() override { return queue_; }
  void record_use() override {
    gates_.push_back(std::make_shared<StreamGate>());
    auto* holder = new std::shared_ptr<StreamGate>(gates_.back());
    if (const cudaError_t error = cudaLaunchHostFunc(stream(), &StreamGate::wait, holder); error != cudaSuccess) {
      delete holder;
      check(error, "cudaLaunchHostFunc");
    }
  }
  void signal_fences() override {
    for (auto& gate : gates_) gate->open();
    // This stream only, never the device: the fences recorded on it now pass.
    check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
  }
  std::size_t drain() override { return queue_.poll(); }
  void close() override { queue_.close(); }
  void mark_device_lost() override {
    device_lost_ = true;
    (void)queue_.mark_device_lost();
  }
  std::optional<std::size_t> capacity() const override { return queue_.capacity(); }

 private:
  cudaStream_t stream() const { return static_cast<cudaStream_t>(context_->stream()); }

  std::shared_ptr<cuda::CudaProviderContext> context_;
  mechanism::FencedDeferredQueue queue_;
  std::vector<std::shared_ptr<StreamGate>> gates_;
  bool device_lost_ = false;
};

class CudaMemory final : public cts::MemoryAccess {
 public:
  void fill(void* ptr, std::size_t bytes, std::uint8_t value) override {
    if (bytes == 0) return;
    // cudaMemset returns before the device writes; a decommit or release
    // right after must not race the write, so wait for it (this stream only).
    check(cudaMemsetAsync(ptr, value, bytes, nullptr), "cudaMemsetAsync");
    check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
  }
  void read(const void* ptr, std::span<std::uint8_t> out) override {
    if (!out.empty()) check(cudaMemcpy(out.data(), ptr, out.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  // Only VMM mappings can be read-only; the driver is loaded on first use.
  cts::WriteProbe probe_write(void* ptr, std::uint8_t) override {
    if (!driver_) {
      auto driver = cuda::load_cuda_vmm_driver(kOrdinal);
      if (!driver) return {cts::WriteProbe::Outcome::kUnknown, driver.error()};
      driver_ = *driver;
    }
    return probe_through_driver(*driver_, ptr);
  }

 private:
  std::shared_ptr<cuda::VmmDriver> driver_;
};

class CudaAdapter : public cts::Adapter {
 public:
  cts::AdapterInfo info() const override {
    return cts::AdapterInfo{
        .name = "cuda",
        .version = "0.1.0",
        .vendor = "ortmem-cts reference",
        .device = DeviceKey::device(kOrdinal),
        .capabilities = {cts::Capability::kContextPins, cts::Capability::kDeferredQueue},
    };
  }
  cts::Availability available() const override {
    auto device = cuda::probe_cuda_device(kOrdinal);
    if (!device) return {false, device.error()};
    return {};
  }
  std::shared_ptr<DeviceAllocator> make_allocator() override {
    auto allocator = cuda::CudaAllocator::create(kOrdinal);
    if (!allocator) environment_broke(allocator.error().message());
    return *allocator;
  }
  std::unique_ptr<cts::ContextUnderTest> make_context(ProviderContextIdentity identity,
                                                      cts::ContextOptions options) override {
    auto context = cuda::CudaProviderContext::create(
        identity, kOrdinal,
        mechanism::ProviderContext::Options{
            options.max_outstanding_pins.value_or(mechanism::ProviderContext::kCounterCapacity)});
    if (!context) environment_broke(context.error());
    return std::make_unique<CudaContext>(*context);
  }
  std::unique_ptr<cts::QueueUnderTest> make_queue(cts::ContextUnderTest& context, cts::QueueOptions options) override {
    return std::make_unique<CudaQueue>(dynamic_cast<CudaContext&>(context).reference(), options);
  }
  cts::MemoryAccess& memory() override { return memory_; }

 private:
  CudaMemory memory_;
};

class CudaVmmAdapter final : public CudaAdapter {
 public:
  cts::AdapterInfo info() const override {
    auto info = CudaAdapter::info();
    info.name = "cuda-vmm";
    info.capabilities.insert(
        {cts::Capability::kVirtualBacking, cts::Capability::kSharedMapping, cts::Capability::kFaultInjection});
    return info;
  }
  cts::Availability available() const override {
    auto driver = cuda::load_cuda_vmm_driver(kOrdinal);
    if (!driver) return {false, driver.error()};
    return {};
  }
  std::shared_ptr<DeviceAllocator> make_allocator() override {
    auto driver = cuda::load_cuda_vmm_driver(kOrdinal);
    if (!driver) environment_broke(driver.error());
    auto allocator =
        cuda::CudaVirtualAllocator::create(*driver, {.device = DeviceKey::device(kOrdinal), .faults = faults_.plan()});
    if (!allocator) environment_broke(allocator.error().message());
    return *allocator;
  }
  cts::FaultInjection* faults() override { return &faults_; }

 private:
  DriverFaultInjection faults_{std::make_shared<cuda::DriverFaults>()};
};

}  // namespace

void register_cuda_adapters() {
  cts::register_adapter("cuda", [] { return std::make_unique<CudaAdapter>(); });
  cts::register_adapter("cuda-vmm", [] { return std::make_unique<CudaVmmAdapter>(); });
}

}  // namespace ortmem::adapters
