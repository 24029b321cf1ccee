#include "plugin/plugin_module.hpp"

#include <dlfcn.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <set>

#include "plugin/plugin_status.hpp"
#include "ortmem/report/integrity.hpp"
#include "ortmem/report/utf8.hpp"

namespace ortmem::plugin {
namespace {

constexpr std::uint64_t kFactorySlots = 64;
// A factory name is read up to its NUL, never further than this.
constexpr std::size_t kNameLimit = 256;

using Negotiate = decltype(Exports::negotiate);
using CreateFactories = decltype(Exports::create_factories);
using QueryUnload = decltype(Exports::query_unload);

std::string hex(std::uint64_t value) {
  std::array<char, 19> text{};
  std::snprintf(text.data(), text.size(), "0x%llx", static_cast<unsigned long long>(value));
  return text.data();
}

// Capability bits that exist only from some minor on.
constexpr std::uint64_t bits_above_minor(std::uint32_t minor) noexcept {
  return minor >= 1 ? 0 : NXMEM_CAP_STRUCTURED_RELEASE;
}

Expected<void, std::string> negotiate(Negotiate call, HostRange host, std::uint32_t& minor, std::uint64_t& flags) {
  NxmemNegotiateRequest request{};
  request.struct_size = sizeof request;
  request.host_range = NxmemVersionRange{NXMEM_ABI_VERSION_MAJOR, NXMEM_ABI_VERSION_MAJOR,
                                         NXMEM_ABI_VERSION_MINOR_BASELINE, host.max_minor};
  request.host_capability_flags = NXMEM_CAP_KNOWN_MASK & ~bits_above_minor(host.max_minor);
  NxmemNegotiateResponse response{};
  const PluginStatus status = read_status(call(&request, &response));
  const std::string offered =
      "1." + std::to_string(NXMEM_ABI_VERSION_MINOR_BASELINE) + "-1." + std::to_string(host.max_minor);
  if (!status.ok()) {
    return fail("negotiation: NxmemNegotiate refused the kit's range " + offered + " with " + status.describe() +
                " (the plugin says it speaks " + std::to_string(response.plugin_range.major_min) + "." +
                std::to_string(response.plugin_range.minor_min) + "-" +
                std::to_string(response.plugin_range.major_max) + "." +
                std::to_string(response.plugin_range.minor_max) + ")");
  }
  if (response.agreed_major != NXMEM_ABI_VERSION_MAJOR || response.agreed_minor > host.max_minor) {
    return fail("negotiation: agreed_major.agreed_minor is " + std::to_string(response.agreed_major) + "." +
                std::to_string(response.agreed_minor) + ", outside the range " + offered +
                " the kit offered; answer a version inside the host's range");
  }
  if (response.reserved != 0) return fail("negotiation: reserved is " + hex(response.reserved) + ", must be 0");
  if ((response.capability_flags & ~NXMEM_CAP_KNOWN_MASK) != 0) {
    return fail("negotiation: capability_flags " + hex(response.capability_flags) + " has bits outside " +
                hex(NXMEM_CAP_KNOWN_MASK) + "; offer only bits the ABI defines");
  }
  if ((response.capability_flags & NXMEM_CAP_ALLOCATOR) == 0) {
    return fail("negotiation: capability_flags " + hex(response.capability_flags) +
                " lacks ALLOCATOR (bit 0), which every plugin must offer");
  }
  if ((response.capability_flags & bits_above_minor(response.agreed_minor)) != 0) {
    return fail("negotiation: capability_flags " + hex(response.capability_flags) +
                " claims STRUCTURED_RELEASE at agreed minor " + std::to_string(response.agreed_minor) +
                "; the bit exists from minor 1, so drop it below");
  }
  minor = response.agreed_minor;
  flags = response.capability_flags;
  return {};
}

// The factory's fields, or why they break the ABI. `raw` is readable_struct.
Expected<Factory, std::string> validate_factory(const NxmemAllocatorFactoryVtable* raw, std::uint64_t index,
                                                const std::set<std::string>& taken) {
  const std::string where = "factory " + std::to_string(index) + ": ";
  if (raw->struct_size < sizeof(NxmemAllocatorFactoryVtable)) {
    return fail(where + "struct_size is " + std::to_string(raw->struct_size) + ", under the " +
                std::to_string(sizeof(NxmemAllocatorFactoryVtable)) + " bytes a factory vtable needs (SHORT_STRUCT)");
  }
  Factory factory;
  std::memcpy(&factory.vtable, raw, sizeof factory.vtable);
  const NxmemAllocatorFactoryVtable& local = factory.vtable;
  if (local.open_allocator == nullptr)
    return fail(where + "open_allocator is NULL; it is a required slot (SHORT_STRUCT)");
  if (local.release == nullptr) return fail(where + "release is NULL; it is a required slot (SHORT_STRUCT)");
  if (local.name == nullptr) return fail(where + "name is NULL; a factory must be named (UTF-8, NUL-terminated)");
  const auto* name = reinterpret_cast<const char*>(local.name);
  const std::size_t length = strnlen(name, kNameLimit);
  if (length == kNameLimit) return fail(where + "name has no NUL within " + std::to_string(kNameLimit) + " bytes");
  factory.name.assign(name, length);
  if (factory.name.empty() || !report::is_utf8(factory.name)) return fail(where + "name is empty or not UTF-8");
  if (taken.contains(factory.name)) {
    return fail(where + "name '" + factory.name +
                "' is already another factory's; names select mechanisms, so each must be unique");
  }
  if (local.device.tier > NXMEM_TIER_DISK) {
    return fail(where + "device.tier is " + std::to_string(local.device.tier) + ", not DEVICE 0, HOST 1 or DISK 2");
  }
  if ((local.capability_flags & ~NXMEM_CAP_KNOWN_MASK) != 0 || (local.capability_flags & NXMEM_CAP_ALLOCATOR) == 0) {
    return fail(where + "capability_flags " + hex(local.capability_flags) +
                " must include ALLOCATOR and no bit outside " + hex(NXMEM_CAP_KNOWN_MASK));
  }
  factory.device = local.device;
  factory.capability_flags = local.capability_flags;
  return factory;
}

// Whether the kit can offer the minors the caller asked for.
Expected<void, std::string> check_host(HostRange host) {
  if (host.max_minor > NXMEM_ABI_VERSION_MINOR) {
    return fail("the kit speaks nxmem minors 0-" + std::to_string(NXMEM_ABI_VERSION_MINOR) + ", not " +
                std::to_string(host.max_minor));
  }
  return {};
}

}  // namespace

std::string capability_names(std::uint64_t flags) {
  static constexpr std::array<std::pair<std::uint64_t, const char*>, 5> kBits = {{
      {NXMEM_CAP_ALLOCATOR, "allocator"},
      {NXMEM_CAP_VIRTUAL_BACKING, "virtual-backing"},
      {NXMEM_CAP_SHARED_MAPPING, "shared-mapping"},
      {NXMEM_CAP_DEFERRED_RELEASE, "deferred-release"},
      {NXMEM_CAP_STRUCTURED_RELEASE, "structured-release"},
  }};
  std::string out;
  for (const auto& [bit, name] : kBits) {
    if ((flags & bit) != 0) out += (out.empty() ? "" : "|") + std::string(name);
  }
  if ((flags & ~NXMEM_CAP_KNOWN_MASK) != 0) out += (out.empty() ? "" : "|") + hex(flags & ~NXMEM_CAP_KNOWN_MASK);
  return out.empty() ? "none" : out;
}

std::string device_name(NxmemDeviceId device) {
  static constexpr std::array<const char*, 3> kTiers = {"device", "host", "disk"};
  const std::string tier =
      device.tier < kTiers.size() ? kTiers[device.tier] : "tier(" + std::to_string(device.tier) + ")";
  return tier + ":" + std::to_string(device.index);
}

Expected<std::shared_ptr<PluginModule>, std::string> PluginModule::load(const std::string& path, HostRange host) {
  if (auto supported = check_host(host); !supported) return fail(supported.error());
  std::shared_ptr<PluginModule> module(new PluginModule());
  module->path_ = path;
  auto digest = report::sha256_of_file(path);
  if (!digest) return fail("cannot read the plugin file: " + digest.error());
  module->sha256_ = std::move(*digest);
  // A path without a slash would make dlopen search the library path and
  // certify some other file than the one hashed.
  const std::string open_path = path.find('/') == std::string::npos ? "./" + path : path;
  module->handle_ = dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (module->handle_ == nullptr) {
    const char* why = dlerror();
    return fail("load: dlopen failed: " + std::string(why != nullptr ? why : "no reason given"));
  }
  const auto symbol = [&](const char* name) { return dlsym(module->handle_, name); };
  Exports exports;
  exports.negotiate = reinterpret_cast<Negotiate>(symbol("NxmemNegotiate"));
  exports.create_factories = reinterpret_cast<CreateFactories>(symbol("NxmemCreateAllocatorFactories"));
  exports.query_unload = reinterpret_cast<QueryUnload>(symbol("NxmemQueryUnloadReadiness"));
  exports.controls = reinterpret_cast<OrtmemCtsPluginControlsFn>(symbol(ORTMEM_CTS_CONTROLS_EXPORT));
  return adopt(std::move(module), exports, host);
}

Expected<std::shared_ptr<PluginModule>, std::string> PluginModule::from_exports(Exports exports, std::string label,
                                                                                HostRange host) {
  if (auto supported = check_host(host); !supported) return fail(supported.error());
  std::shared_ptr<PluginModule> module(new PluginModule());
  module->path_ = std::move(label);
  return adopt(std::move(module), exports, host);
}

Expected<std::shared_ptr<PluginModule>, std::string> PluginModule::adopt(std::shared_ptr<PluginModule> module,
                                                                         Exports exports, HostRange host) {
  module->exports_ = exports;
  for (const auto& [found, name] : {std::pair<bool, const char*>{exports.negotiate != nullptr, "NxmemNegotiate"},
                                    {exports.create_factories != nullptr, "NxmemCreateAllocatorFactories"},
                                    {exports.query_unload != nullptr, "NxmemQueryUnloadReadiness"}}) {
    if (!found)
      return fail(std::string("load: the library does not export ") + name +
                  "; an nxmem plugin exports all three entry points");
  }
  if (auto agreed = negotiate(exports.negotiate, host, module->agreed_minor_, module->capability_flags_); !agreed) {
    return fail(agreed.error());
  }

  std::array<const NxmemAllocatorFactoryVtable*, kFactorySlots> slots{};
  std::uint64_t count = 0;
  const PluginStatus status = read_status(exports.create_factories(slots.data(), kFactorySlots, &count));
  // Every pointer written, even past the count or with a failed status, is the host's now.
  for (const auto* slot : slots) {
    if (slot != nullptr) module->owned_factories_.push_back(slot);
  }
  if (!status.ok()) return fail("factories: NxmemCreateAllocatorFactories answered " + status.describe());
  if (count > kFactorySlots) {
    return fail("factories: out_count is " + std::to_string(count) + ", more than the " +
                std::to_string(kFactorySlots) + " slots the host offered");
  }
  if (count == 0) return fail("factories: the plugin created no factory, so there is nothing to certify");
  std::set<std::string> names;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (slots[i] == nullptr)
      return fail("factory " + std::to_string(i) + ": NULL inside out_count " + std::to_string(count));
    if (!readable_struct(slots[i]))
      return fail("factory " + std::to_string(i) + ": not 8-byte aligned (INVALID_ARGUMENT)");
    auto factory = validate_factory(slots[i], i, names);
    if (!factory) return fail(factory.error());
    names.insert(factory->name);
    module->factories_.push_back(std::move(*factory));
  }
  return module;
}

const Factory* PluginModule::factory(const std::string& name) const noexcept {
  for (const Factory& factory : factories_) {
    if (factory.name == name) return &factory;
  }
  return nullptr;
}

std::optional<NxmemUnloadReport> PluginModule::unload_report() const {
  if (exports_.query_unload == nullptr) return std::nullopt;
  NxmemUnloadReport report{};
  report.struct_size = sizeof report;
  if (!read_status(exports_.query_unload(&report)).ok()) return std::nullopt;
  return report;
}

PluginModule::~PluginModule() {
  for (const NxmemAllocatorFactoryVtable* raw : owned_factories_) {
    // A factory too short or misaligned to read has no release the host can
    // find; it is leaked rather than guessed at.
    if (!readable_struct(raw) || raw->struct_size < sizeof(NxmemAllocatorFactoryVtable) || raw->release == nullptr)
      continue;
    raw->release(raw->ctx);
  }
  if (handle_ == nullptr) return;  // from_exports: no library of ours to close
  const auto report = unload_report();
  const bool quiet = report && report->live_allocators == 0 && report->live_allocations == 0 &&
                     report->live_views == 0 && report->live_capabilities == 0 && report->queued_releases == 0;
  if (quiet) dlclose(handle_);
}

}  // namespace ortmem::plugin
