#include "ortmem/cts/adapter_registry.hpp"

#include <map>

#include "ortmem/detail/lock_guard.hpp"
#include "ortmem/detail/mutex.hpp"

namespace ortmem::cts {
namespace {

using detail::LockGuard;

struct Registry {
  detail::Mutex mutex;
  std::map<std::string, AdapterFactory> factories ORTMEM_GUARDED_BY(mutex);
  std::vector<std::string> selected ORTMEM_GUARDED_BY(mutex);
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
  Registry& r = registry();
  const LockGuard lock(r.mutex);
  return r.factories.emplace(std::move(name), std::move(factory)).second;
}

std::vector<std::string> registered_adapters() {
  Registry& r = registry();
  const LockGuard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, factory] : r.factories) names.push_back(name);
  return names;
}

std::unique_ptr<Adapter> make_adapter(const std::string& name) {
  Registry& r = registry();
  AdapterFactory factory;
  {
    const LockGuard lock(r.mutex);
    const auto found = r.factories.find(name);
    if (found == r.factories.end()) return nullptr;
    factory = found->second;
  }
  return factory();
}

void select_adapters(std::vector<std::string> names) {
  Registry& r = registry();
  const LockGuard lock(r.mutex);
  r.selected = std::move(names);
}

std::vector<std::string> selected_adapters() {
  Registry& r = registry();
  const LockGuard lock(r.mutex);
  return r.selected;
}

}  // namespace ortmem::cts
