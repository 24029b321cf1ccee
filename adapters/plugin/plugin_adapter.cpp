#include "plugin/plugin_adapter.hpp"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <mutex>
#include <set>
#include <vector>

#include "plugin/plugin_allocator.hpp"
#include "plugin/plugin_queue.hpp"
#include "ortmem/cts/adapter_registry.hpp"

namespace ortmem::adapters {
namespace {

constexpr std::uint64_t kRequired =
    NXMEM_CAP_ALLOCATOR | NXMEM_CAP_VIRTUAL_BACKING | NXMEM_CAP_SHARED_MAPPING | NXMEM_CAP_DEFERRED_RELEASE;
constexpr std::uint64_t kCertified = kRequired | NXMEM_CAP_STRUCTURED_RELEASE;

// The allocators one adapter opened, shared with its queues, faults and
// memory access, which may outlive the adapter in a test's teardown: the
// ABI keeps a queue (and the extension's controls) in each allocator, so
// each of those finds its allocator here.
class Opened {
 public:
  void add(const std::shared_ptr<plugin::PluginAllocator>& allocator) {
    const std::lock_guard lock(mutex_);
    std::erase_if(made_, [](const auto& weak) { return weak.expired(); });
    made_.push_back(allocator);
  }
  [[nodiscard]] std::vector<std::shared_ptr<plugin::PluginAllocator>> live() const {
    std::vector<std::shared_ptr<plugin::PluginAllocator>> found;
    const std::lock_guard lock(mutex_);
    for (const auto& weak : made_) {
      if (auto allocator = weak.lock()) found.push_back(std::move(allocator));
    }
    return found;
  }
  [[nodiscard]] std::shared_ptr<plugin::PluginAllocator> holding(void* ptr, std::size_t bytes,
                                                                 std::size_t align) const {
    for (auto& allocator : live()) {
      if (allocator->holds(ptr, bytes, align)) return allocator;
    }
    return nullptr;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::weak_ptr<plugin::PluginAllocator>> made_;  // guarded by mutex_
};

// The allocator opened when the plugin was loaded: a later refusal is the
// plugin's fault, and crashing here costs the one test (in an isolated
// child) instead of handing the suites a null allocator.
[[noreturn]] void opened_late(const std::string& path, const std::string& error) {
  std::fprintf(stderr, "ortmem-cts: nxmem plugin %s: %s\n", path.c_str(), error.c_str());
  std::abort();
}

[[noreturn]] void control_failed(const char* slot, const plugin::PluginStatus& answer) {
  std::fprintf(stderr, "ortmem-cts: the plugin offers %s in its control extension, and it answered %s\n", slot,
               answer.describe().c_str());
  std::abort();
}

// FAULT_INJECTION: the kit's fault points armed in every allocator the
// adapter has open (each counts its own steps, as each reference allocator
// counts its own system calls). With none open, the answer still has to say
// whether the point exists, so an allocator opened for the question is asked.
class PluginFaults final : public cts::FaultInjection {
 public:
  using Open = std::function<std::shared_ptr<plugin::PluginAllocator>()>;
  PluginFaults(plugin::Controls controls, std::shared_ptr<const Opened> opened, Open open)
      : controls_(controls), opened_(std::move(opened)), open_(std::move(open)) {}

  bool arm(cts::FaultPoint point, std::uint64_t nth) override {
    const auto abi_point = point_of(point);
    if (!abi_point) return false;  // the control extension has no such point
    auto live = opened_->live();
    if (live.empty()) {
      const auto asked = open_();
      const plugin::PluginStatus answer = controls_.arm_fault(asked->plugin_ctx(), *abi_point, nth);
      if (!answer.ok() && answer.code != NXMEM_STATUS_NOT_IMPLEMENTED) control_failed("arm_fault", answer);
      if (const auto cleared = controls_.clear_faults(asked->plugin_ctx()); !cleared.ok()) {
        control_failed("clear_faults", cleared);
      }
      return answer.ok();
    }
    bool armed = true;
    for (const auto& allocator : live) {
      const plugin::PluginStatus answer = controls_.arm_fault(allocator->plugin_ctx(), *abi_point, nth);
      if (answer.code == NXMEM_STATUS_NOT_IMPLEMENTED) {
        armed = false;
      } else if (!answer.ok()) {
        control_failed("arm_fault", answer);
      }
    }
    return armed;
  }
  void clear() override {
    for (const auto& allocator : opened_->live()) {
      if (const auto answer = controls_.clear_faults(allocator->plugin_ctx()); !answer.ok()) {
        control_failed("clear_faults", answer);
      }
    }
  }

 private:
  static std::optional<std::uint32_t> point_of(cts::FaultPoint point) {
    switch (point) {
      case cts::FaultPoint::kReleaseUnmap: return ORTMEM_CTS_FAULT_RELEASE_UNMAP;
      case cts::FaultPoint::kCommit: return ORTMEM_CTS_FAULT_COMMIT;
      case cts::FaultPoint::kDecommit: return ORTMEM_CTS_FAULT_DECOMMIT;
      case cts::FaultPoint::kPrefixMap: return ORTMEM_CTS_FAULT_PREFIX_MAP;
      case cts::FaultPoint::kPhysicalFree:
      case cts::FaultPoint::kAccessGrant: return std::nullopt;
    }
    return std::nullopt;
  }

  plugin::Controls controls_;
  std::shared_ptr<const Opened> opened_;
  Open open_;
};

// MEMORY_ACCESS: the bytes of memory the host cannot address, through the
// plugin. Any open allocator of the mechanism serves: the slots take
// memory any of them handed out.
class PluginMemory final : public cts::MemoryAccess {
 public:
  PluginMemory(plugin::Controls controls, std::shared_ptr<const Opened> opened)
      : controls_(controls), opened_(std::move(opened)) {}

  void fill(void* ptr, std::size_t bytes, std::uint8_t value) override {
    if (const auto answer = controls_.fill(ctx(), ptr, bytes, value); !answer.ok()) control_failed("fill", answer);
  }
  void read(const void* ptr, std::span<std::uint8_t> out) override {
    if (const auto answer = controls_.read(ctx(), ptr, out.data(), out.size()); !answer.ok()) {
      control_failed("read", answer);
    }
  }
  // Never the forked write of the default: a child writing through the
  // plugin's fill would ask the plugin, not the system, what the mapping
  // allows.
  cts::WriteProbe probe_write(void* ptr, std::uint8_t value) override {
    if (!controls_.offers_write_probe()) {
      return {cts::WriteProbe::Outcome::kUnknown, "the plugin's control extension has no probe_write"};
    }
    std::uint32_t outcome = ORTMEM_CTS_WRITE_UNKNOWN;
    if (const auto answer = controls_.probe_write(ctx(), ptr, value, outcome); !answer.ok()) {
      return {cts::WriteProbe::Outcome::kUnknown, "the plugin's probe_write answered " + answer.describe()};
    }
    switch (outcome) {
      case ORTMEM_CTS_WRITE_REFUSED: return {cts::WriteProbe::Outcome::kRefused, "the plugin's probe_write: refused"};
      case ORTMEM_CTS_WRITE_ALLOWED: return {cts::WriteProbe::Outcome::kAllowed, "the plugin's probe_write: allowed"};
      default: return {cts::WriteProbe::Outcome::kUnknown, "the plugin's probe_write could not tell"};
    }
  }

 private:
  void* ctx() const {
    const auto live = opened_->live();
    if (live.empty()) {
      std::fprintf(stderr,
                   "ortmem-cts: a suite read plugin memory with no allocator of the mechanism open (a kit bug)\n");
      std::abort();
    }
    return live.back()->plugin_ctx();
  }

  plugin::Controls controls_;
  std::shared_ptr<const Opened> opened_;
};

// The kit's controls a table offers, by the bits that make each one up.
std::set<cts::Control> kit_controls(const std::optional<plugin::Controls>& controls) {
  std::set<cts::Control> offered;
  if (!controls) return offered;
  const std::pair<std::uint64_t, cts::Control> map[] = {
      {ORTMEM_CTS_CONTROL_FENCES, cts::Control::kFences},
      {ORTMEM_CTS_CONTROL_QUEUE_CLOSE, cts::Control::kQueueClose},
      {ORTMEM_CTS_CONTROL_QUEUE_CAPACITY, cts::Control::kQueueCapacity},
      {ORTMEM_CTS_CONTROL_QUEUE_DEVICE_LOSS, cts::Control::kQueueDeviceLoss},
      {ORTMEM_CTS_CONTROL_FAULT_INJECTION, cts::Control::kFaultInjection},
  };
  for (const auto& [bit, control] : map) {
    if (controls->offers(bit)) offered.insert(control);
  }
  return offered;
}

class PluginAdapter final : public HostAdapter {
 public:
  PluginAdapter(std::shared_ptr<plugin::PluginModule> module, plugin::Factory factory,
                std::optional<plugin::Controls> controls)
      : module_(std::move(module)), factory_(std::move(factory)), controls_(controls) {
    if (controls_ && controls_->offers(ORTMEM_CTS_CONTROL_FAULT_INJECTION)) {
      faults_.emplace(*controls_, opened_, [module = module_, factory = factory_] {
        auto opened = plugin::PluginAllocator::open(module, factory, required_capabilities(factory));
        if (!opened) opened_late(module->path(), opened.error());
        return std::move(*opened);
      });
    }
    if (controls_ && controls_->offers(ORTMEM_CTS_CONTROL_MEMORY_ACCESS)) memory_.emplace(*controls_, opened_);
  }

  cts::AdapterInfo info() const override {
    const std::string interface = "nxmem 1." + std::to_string(module_->agreed_minor());
    return cts::AdapterInfo{
        .name = factory_.name,
        .version = interface,
        .vendor = "nxmem plugin",
        .device = plugin::device_key_of(factory_.device),
        .capabilities = capabilities(),
        // What the ABI offers the kit is none of its controls (no fences,
        // close, bound, device loss or faults); the extension, what it offers.
        .loaded_from = cts::LoadedFrom{controls_ ? interface + " + ortmem-cts controls " +
                                                       std::to_string(ORTMEM_CTS_CONTROLS_VERSION)
                                                 : interface,
                                       module_->path(), module_->sha256(), factory_.name, kit_controls(controls_)},
    };
  }

  cts::Availability available() const override {
    if (factory_.device.tier == NXMEM_TIER_HOST || memory_) return {};
    return {false, "the mechanism's memory is on tier " + plugin::device_name(factory_.device) +
                       ", which the kit can only read through the MEMORY_ACCESS control of the ortmem-cts control "
                       "extension, and the plugin does not offer it"};
  }

  // Host memory is read by the kit itself, never through the plugin's word.
  cts::MemoryAccess& memory() override {
    if (factory_.device.tier != NXMEM_TIER_HOST && memory_) return *memory_;
    return HostAdapter::memory();
  }
  cts::FaultInjection* faults() override { return faults_ ? &*faults_ : nullptr; }

  std::shared_ptr<DeviceAllocator> make_allocator() override {
    auto allocator = plugin::PluginAllocator::open(module_, factory_, required_capabilities(factory_));
    if (allocator) {
      opened_->add(*allocator);
      return std::move(*allocator);
    }
    opened_late(module_->path(), allocator.error());
  }

  // The plugin's own deferred release, over the kit's reference context.
  std::unique_ptr<cts::QueueUnderTest> make_queue(cts::ContextUnderTest& context, cts::QueueOptions options) override {
    return std::make_unique<PluginQueue>(
        dynamic_cast<HostContextUnderTest&>(context).shared_pins(),
        [opened = opened_](void* ptr, std::size_t bytes, std::size_t align) {
          return opened->holding(ptr, bytes, align);
        },
        controls_, options.capacity);
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
    if (faults_) declared.insert(cts::Capability::kFaultInjection);
    return declared;
  }

  std::shared_ptr<plugin::PluginModule> module_;
  plugin::Factory factory_;
  std::optional<plugin::Controls> controls_;
  std::shared_ptr<Opened> opened_ = std::make_shared<Opened>();
  std::optional<PluginFaults> faults_;
  std::optional<PluginMemory> memory_;
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

std::string control_names(const plugin::Controls& controls) {
  std::string names;
  for (const cts::Control control : kit_controls(controls)) {
    names += (names.empty() ? "" : ", ") + std::string(cts::control_name(control));
  }
  if (controls.offers(ORTMEM_CTS_CONTROL_MEMORY_ACCESS)) names += names.empty() ? "memory-access" : ", memory-access";
  return names;
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
    auto probe = plugin::PluginAllocator::open(*module, *factory, required_capabilities(*factory));
    if (!probe) return fail("nxmem plugin " + path + ", mechanism '" + factory->name + "': " + probe.error());
    // The control extension's table is read once, here, for the mechanism
    // the allocator names: a bad table refuses the plugin like a bad vtable.
    auto controls =
        plugin::Controls::load((*module)->exports().controls, (*probe)->mechanism_id(), factory->capability_flags);
    probe->reset();
    if (!controls) return fail("nxmem plugin " + path + ", mechanism '" + factory->name + "': " + controls.error());
    // Keyed by path and mechanism, so a plugin's names never meet the
    // compiled-in adapters' and an isolated child given the same key loads
    // the same mechanism.
    const std::string name = path + "#" + factory->name;
    cts::register_adapter(name, [module = *module, copy = *factory, table = *controls] {
      return std::make_unique<PluginAdapter>(module, copy, table);
    });
    selection.adapters.push_back(name);
  }
  return selection;
}

}  // namespace ortmem::adapters
