// adapters/host/host_adapter.hpp: the host reference implementation as an adapter.
//
// Eager HostAllocator, mechanism::ProviderContext pins, and a mechanism::FencedDeferredQueue
// whose fences follow a mechanism::HostStream. Bytes are read and written with memcpy.
// The classes are public so that the known-bad adapters (adapters/mutants) can
// start from the reference and break exactly one rule.
#pragma once

#include <cstdint>
#include <memory>

#include "ortmem/cts/adapter.hpp"
#include "ortmem/mechanism/fenced_deferred_queue.hpp"
#include "ortmem/mechanism/host_stream.hpp"
#include "ortmem/mechanism/provider_context.hpp"
#include "ortmem/mechanism/testing/fault_injecting_fences.hpp"
#include "reference_context.hpp"

namespace ortmem::adapters {

// `allocator`, handed to the kit as the memory of one provider context: when
// the last holder lets go, reclaim_all_after_context_destroyed() frees what is
// still live, quarantined allocations included, as destroying the context
// would. The host allocators' destructors reclaim nothing (the contract), so
// without this every test would keep its quarantined memory for the life of
// the process, and a long certification would run out of address space.
template <class HostMemoryAllocator>
std::shared_ptr<HostMemoryAllocator> scoped_to_context(std::shared_ptr<HostMemoryAllocator> allocator) {
  HostMemoryAllocator* raw = allocator.get();
  return {raw, [owner = std::move(allocator)](HostMemoryAllocator* held) mutable {
            (void)held->reclaim_all_after_context_destroyed();
            owner.reset();
          }};
}

class HostContextUnderTest : public ReferenceContextUnderTest<mechanism::ProviderContext> {
 public:
  HostContextUnderTest(ProviderContextIdentity identity, cts::ContextOptions options);

  // The pin source a queue of this context pins through.
  [[nodiscard]] virtual std::shared_ptr<ProviderContextPinSource> shared_pins() { return reference(); }
};

// The reference queue, fenced by a host stream: directly, or through
// simulated CUDA events over it (FenceFaults: the kit can make those fail).
class HostQueueUnderTest : public cts::QueueUnderTest {
 public:
  enum class Fences : std::uint8_t { kHostStream, kSimulatedEvents };
  HostQueueUnderTest(std::shared_ptr<ProviderContextPinSource> context, cts::QueueOptions options,
                     Fences fences = Fences::kHostStream);

  DeferredReleaseQueue& queue() override { return queue_; }
  void record_use() override { (void)stream_->submit(); }
  void signal_fences() override { stream_->complete_all(); }
  std::size_t drain() override { return queue_.poll(); }
  void close() override { queue_.close(); }
  void mark_device_lost() override { (void)queue_.mark_device_lost(); }
  std::optional<std::size_t> capacity() const override { return queue_.capacity(); }
  std::shared_ptr<cts::FenceFaults> fence_faults() const override;

 private:
  std::shared_ptr<mechanism::HostStream> stream_;
  std::shared_ptr<mechanism::testing::FaultInjectingFences> events_;  // null: the stream's own fences
  mechanism::FencedDeferredQueue queue_;
};

class HostMemory final : public cts::MemoryAccess {
 public:
  void fill(void* ptr, std::size_t bytes, std::uint8_t value) override;
  void read(const void* ptr, std::span<std::uint8_t> out) override;
};

class HostAdapter : public cts::Adapter {
 public:
  cts::AdapterInfo info() const override;
  cts::Availability available() const override { return {}; }
  std::shared_ptr<DeviceAllocator> make_allocator() override;
  std::unique_ptr<cts::ContextUnderTest> make_context(ProviderContextIdentity identity,
                                                      cts::ContextOptions options) override;
  std::unique_ptr<cts::QueueUnderTest> make_queue(cts::ContextUnderTest& context, cts::QueueOptions options) override;
  cts::MemoryAccess& memory() override { return memory_; }

 private:
  HostMemory memory_;
};

// Registers the adapter named "host".
void register_host_adapter();

}  // namespace ortmem::adapters
