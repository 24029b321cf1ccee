// adapters/plugin/plugin_module.hpp: one nxmem plugin library, loaded,
// negotiated and validated.
//
// Loading either yields a module whose every factory passed the ABI's
// rules, or one line naming the rule that was broken and the field that
// broke it; nothing half-loaded is ever handed out. The module owns its
// factories (each released exactly once, including those of a load that
// failed after they were transferred) and the library handle, which it
// closes only when the unload gate opens: the plugin's own unload report is
// all zero after everything the kit made was released. A module whose gate
// stays shut is leaked on purpose, since unmapping code that a live object
// may still call is the one thing a host must never do.
//
// Allocators opened from a factory hold the module (shared ownership), so
// it outlives every vtable it handed out.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nxmem/nxmem_abi.h"
#include "nxmem/ortmem_cts_controls.h"
#include "ortmem/expected.hpp"

namespace ortmem::plugin {

// A validated factory: the local copy the kit reads, never the plugin's bytes.
struct Factory {
  std::string name;
  NxmemDeviceId device{};
  std::uint64_t capability_flags = 0;
  NxmemAllocatorFactoryVtable vtable{};
};

// What the kit offers in negotiation: major 1, minors 0..max_minor.
struct HostRange {
  std::uint32_t max_minor = NXMEM_ABI_VERSION_MINOR;
};

// The three entry points a plugin library exports, and the optional fourth
// of the kit's control extension (ortmem_cts_controls.h).
struct Exports {
  NxmemStatus (*negotiate)(const NxmemNegotiateRequest*, NxmemNegotiateResponse*) = nullptr;
  NxmemStatus (*create_factories)(const NxmemAllocatorFactoryVtable**, std::uint64_t, std::uint64_t*) = nullptr;
  NxmemStatus (*query_unload)(NxmemUnloadReport*) = nullptr;
  OrtmemCtsPluginControlsFn controls = nullptr;
};

class PluginModule {
 public:
  // dlopen(path), the three exports, negotiation and every factory's
  // validation. The error is one line: the rule, the field, what to do.
  [[nodiscard]] static Expected<std::shared_ptr<PluginModule>, std::string> load(const std::string& path,
                                                                                 HostRange host = {});
  // The same negotiation and validation on exports already in this process,
  // so a fuzzer can play the plugin without a library on disk
  // (adapters/plugin/fuzz). load() ends in the same code. `label` stands in
  // for the path; there is no file to hash and no handle to close.
  [[nodiscard]] static Expected<std::shared_ptr<PluginModule>, std::string> from_exports(Exports exports,
                                                                                         std::string label,
                                                                                         HostRange host = {});

  PluginModule(const PluginModule&) = delete;
  PluginModule& operator=(const PluginModule&) = delete;
  ~PluginModule();

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] const std::string& sha256() const noexcept { return sha256_; }
  [[nodiscard]] std::uint32_t agreed_minor() const noexcept { return agreed_minor_; }
  // What negotiation offered: plugin ∧ host ∧ known, less bits above the agreed minor.
  [[nodiscard]] std::uint64_t capability_flags() const noexcept { return capability_flags_; }
  [[nodiscard]] const std::vector<Factory>& factories() const noexcept { return factories_; }
  [[nodiscard]] const Factory* factory(const std::string& name) const noexcept;

  // The plugin's unload report, read now; nullopt when the query failed.
  [[nodiscard]] std::optional<NxmemUnloadReport> unload_report() const;
  // The plugin's entry points, for the ABI probes that call them raw.
  [[nodiscard]] const Exports& exports() const noexcept { return exports_; }

 private:
  PluginModule() = default;
  // Everything after the exports are found: negotiation, then the factories.
  [[nodiscard]] static Expected<std::shared_ptr<PluginModule>, std::string> adopt(std::shared_ptr<PluginModule> module,
                                                                                  Exports exports, HostRange host);

  void* handle_ = nullptr;
  std::string path_;
  std::string sha256_;
  std::uint32_t agreed_minor_ = 0;
  std::uint64_t capability_flags_ = 0;
  std::vector<Factory> factories_;
  // Every factory pointer the plugin transferred, valid or not: each is the
  // host's to release exactly once.
  std::vector<const NxmemAllocatorFactoryVtable*> owned_factories_;
  Exports exports_;
};

// Capability bits by name, for people: "allocator|virtual-backing".
[[nodiscard]] std::string capability_names(std::uint64_t flags);
// "host:0", "device:1", "disk:0", or "tier(7):0" for a tier the ABI does not know.
[[nodiscard]] std::string device_name(NxmemDeviceId device);

// Whether `address` meets the ABI's rule for a struct pointer: non-null and
// 8-byte aligned.
[[nodiscard]] inline bool readable_struct(const void* address) noexcept {
  return address != nullptr && reinterpret_cast<std::uintptr_t>(address) % 8 == 0;
}

}  // namespace ortmem::plugin
