// The reference parts (ortmem/cts/reference_parts.hpp) are the host
// adapter's own classes, so a borrowed part behaves exactly as the host
// adapter's does.
#include "ortmem/cts/reference_parts.hpp"

#include "host/host_adapter.hpp"

namespace ortmem::cts {

std::unique_ptr<ContextUnderTest> make_reference_context(ProviderContextIdentity identity, ContextOptions options) {
  return std::make_unique<adapters::HostContextUnderTest>(identity, options);
}

std::unique_ptr<QueueUnderTest> make_reference_queue(ContextUnderTest& context, QueueOptions options) {
  auto* reference = dynamic_cast<adapters::HostContextUnderTest*>(&context);
  if (reference == nullptr) return nullptr;
  return std::make_unique<adapters::HostQueueUnderTest>(reference->shared_pins(), options);
}

MemoryAccess& host_memory_access() {
  // HostMemory holds no state: one object serves every thread.
  static adapters::HostMemory memory;
  return memory;
}

}  // namespace ortmem::cts
