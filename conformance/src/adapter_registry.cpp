#include "ortmem/cts/adapter_registry.hpp"

#include <map>
#include <mutex>

namespace ortmem::cts {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, AdapterFactory> factories;
  std::vector<std::string> selected;
};

// A function-local static: built on first use, whatever the initialisation order.
Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

std::string_view capability_name(Capability capability) noexcept {
  switch (capability) {
    case Capability::kVirtualBacking: return "virtual-backing";
    case Capability::kSharedMapping: return "shared-mapping";
    case Capability::kContextPins: return "context-pins";
    case Capability::kDeferredQueue: return "deferred-queue";
    case Capability::kFaultInjection: return "fault-injection";
    case Capability::kNxmemAbi: return "nxmem-abi";
  }
  return "unknown";
}

std::string_view control_name(Control control) noexcept {
  switch (control) {
    case Control::kFences: return "fences";
    case Control::kQueueClose: return "queue-close";
    case Control::kQueueCapacity: return "queue-capacity";
    case Control::kQueueDeviceLoss: return "queue-device-loss";
    case Control::kFaultInjection: return "fault-injection";
    case Control::kAllocatorInterposition: return "allocator-interposition";
  }
  return "unknown";
}

const std::set<Control>& all_controls() {
  static const std::set<Control> every = {Control::kFences,         Control::kQueueClose,
                                          Control::kQueueCapacity,  Control::kQueueDeviceLoss,
                                          Control::kFaultInjection, Control::kAllocatorInterposition};
  return every;
}

bool register_adapter(std::string name, AdapterFactory factory) {
  const std::lock_guard lock(registry().mutex);
  return registry().factories.emplace(std::move(name), std::move(factory)).second;
}

std::vector<std::string> registered_adapters() {
  const std::lock_guard lock(registry().mutex);
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry().factories) names.push_back(name);
  return names;
}

std::unique_ptr<Adapter> make_adapter(const std::string& name) {
  AdapterFactory factory;
  {
    const std::lock_guard lock(registry().mutex);
    const auto found = registry().factories.find(name);
    if (found == registry().factories.end()) return nullptr;
    factory = found->second;
  }
  return factory();
}

void select_adapters(std::vector<std::string> names) {
  const std::lock_guard lock(registry().mutex);
  registry().selected = std::move(names);
}

const std::vector<std::string>& selected_adapters() { return registry().selected; }

}  // namespace ortmem::cts
