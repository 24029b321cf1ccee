#include "adapters/plugin/plugin_adapter.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <vector>

#include "adapters/plugin/plugin_allocator.hpp"
#include "adapters/plugin/plugin_queue.hpp"
#include "ortmem/cts/adapter_registry.hpp"

namespace ortmem::adapters {
namespace {

constexpr std::uint64_t kRequired =
    NXMEM_CAP_ALLOCATOR | NXMEM_CAP_VIRTUAL_BACKING | NXMEM_CAP_SHARED_MAPPING | NXMEM_CAP_DEFERRED_RELEASE;
constexpr std::uint64_t kCertified = kRequired | NXMEM_CAP_STRUCTURED_RELEASE;

class PluginAdapter final : public HostAdapter {
 public:
  PluginAdapter(std::shared_ptr<plugin::PluginModule> module, plugin::Factory factory)
      : module_(std::move(module)), factory_(std::move(factory)) {}

  cts::AdapterInfo info() const override {
    const std::string interface = "nxmem 1." + std::to_string(module_->agreed_minor());
    return cts::AdapterInfo{
        .name = factory_.name,
        .version = interface,
        .vendor = "nxmem plugin",
        .device = plugin::device_key_of(factory_.device),
        .capabilities = capabilities(),
        // The ABI offers the kit none of its controls (no fences, close,
        // bound, device loss or faults).
        .loaded_from = cts::LoadedFrom{interface, module_->path(), module_->sha256(), factory_.name, {}},
    };
  }

  cts::Availability available() const override {
    if (factory_.device.tier == NXMEM_TIER_HOST) return {};
    return {false, "the mechanism's memory is on tier " + plugin::device_name(factory_.device) +
                       ", which the kit can only read through the plugin control extension (not yet supported)"};
  }

  std::shared_ptr<DeviceAllocator> make_allocator() override {
    auto allocator = plugin::PluginAllocator::open(module_, factory_, required_capabilities(factory_));
    if (allocator) {
      const std::lock_guard lock(*made_mutex_);
      std::erase_if(*made_, [](const auto& weak) { return weak.expired(); });
      made_->push_back(*allocator);
      return std::move(*allocator);
    }
    // It opened when the plugin was loaded: a later refusal is the plugin's
    // fault, and crashing here costs the one test (in an isolated child)
    // instead of handing the suites a null allocator.
    std::fprintf(stderr, "ortmem-cts: nxmem plugin %s: %s\n", module_->path().c_str(), allocator.error().c_str());
    std::abort();
  }

  // The plugin's own deferred release, over the kit's reference context.
  std::unique_ptr<cts::QueueUnderTest> make_queue(cts::ContextUnderTest& context, cts::QueueOptions) override {
    return std::make_unique<PluginQueue>(
        dynamic_cast<HostContext&>(context).shared_pins(),
        [made = made_, mutex = made_mutex_](void* ptr, std::size_t bytes,
                                            std::size_t align) -> std::shared_ptr<plugin::PluginAllocator> {
          const std::lock_guard lock(*mutex);
          for (const auto& weak : *made) {
            auto allocator = weak.lock();
            if (allocator != nullptr && allocator->holds(ptr, bytes, align)) return allocator;
          }
          return nullptr;
        });
  }

  [[nodiscard]] PluginUnderTest under_test() const { return {module_, factory_}; }

 private:
  // The factory's declaration: a capability declared and then missing from
  // the allocator it opens fails its profile, as for any adapter.
  std::set<cts::Capability> capabilities() const {
    std::set<cts::Capability> declared = {cts::Capability::kNxmemAbi};
    if ((factory_.capability_flags & NXMEM_CAP_VIRTUAL_BACKING) != 0) declared.insert(cts::Capability::kVirtualBacking);
    if ((factory_.capability_flags & NXMEM_CAP_SHARED_MAPPING) != 0) declared.insert(cts::Capability::kSharedMapping);
    if ((factory_.capability_flags & NXMEM_CAP_DEFERRED_RELEASE) != 0) declared.insert(cts::Capability::kDeferredQueue);
    return declared;
  }

  std::shared_ptr<plugin::PluginModule> module_;
  plugin::Factory factory_;
  // Every allocator this adapter opened, so a queue can hand a request to
  // the one that holds it: the ABI's queue is the allocator's. Shared with
  // the queues, which may outlive the adapter in a test's teardown.
  std::shared_ptr<std::mutex> made_mutex_ = std::make_shared<std::mutex>();
  std::shared_ptr<std::vector<std::weak_ptr<plugin::PluginAllocator>>> made_ =
      std::make_shared<std::vector<std::weak_ptr<plugin::PluginAllocator>>>();
};

}  // namespace

std::optional<PluginUnderTest> plugin_under_test(const cts::Adapter& adapter) {
  const auto* plugin = dynamic_cast<const PluginAdapter*>(&adapter);
  if (plugin == nullptr) return std::nullopt;
  return plugin->under_test();
}

std::uint64_t required_capabilities(const plugin::Factory& factory) { return factory.capability_flags & kRequired; }

bool names_a_plugin(const std::string& spec) {
  const std::string path = spec.substr(0, spec.rfind('#'));
  return spec.find('/') != std::string::npos || (path.size() > 3 && path.ends_with(".so"));
}

std::string uncertified_capabilities(std::uint64_t flags) {
  const std::uint64_t left = flags & ~kCertified;
  return left == 0 ? "" : plugin::capability_names(left);
}

Expected<PluginSelection, std::string> register_plugin_adapters(const std::string& spec, plugin::HostRange host) {
  const auto hash = spec.rfind('#');
  const std::string path = spec.substr(0, hash);
  const std::string wanted = hash == std::string::npos ? "" : spec.substr(hash + 1);
  auto module = plugin::PluginModule::load(path, host);
  if (!module) return fail("nxmem plugin " + path + ": " + module.error());
  PluginSelection selection{*module, {}};
  std::vector<const plugin::Factory*> chosen;
  if (!wanted.empty()) {
    const plugin::Factory* factory = (*module)->factory(wanted);
    if (factory == nullptr) {
      std::string names;
      for (const auto& each : (*module)->factories()) names += (names.empty() ? "" : ", ") + each.name;
      return fail("nxmem plugin " + path + " has no mechanism named '" + wanted + "' (it has: " + names + ")");
    }
    chosen.push_back(factory);
  } else {
    for (const auto& factory : (*module)->factories()) chosen.push_back(&factory);
  }
  for (const plugin::Factory* factory : chosen) {
    // Open and drop one allocator now, so a vtable that breaks the ABI stops
    // the run before any test instead of failing every one of them.
    if (auto probe = plugin::PluginAllocator::open(*module, *factory, required_capabilities(*factory)); !probe) {
      return fail("nxmem plugin " + path + ", mechanism '" + factory->name + "': " + probe.error());
    }
    // Keyed by path and mechanism, so a plugin's names never meet the
    // compiled-in adapters' and an isolated child given the same key loads
    // the same mechanism.
    const std::string name = path + "#" + factory->name;
    cts::register_adapter(name, [module = *module, copy = *factory] { return std::make_unique<PluginAdapter>(module, copy); });
    selection.adapters.push_back(name);
  }
  return selection;
}

}  // namespace ortmem::adapters
