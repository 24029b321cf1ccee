// adapters/plugin/plugin_adapter.hpp: one mechanism (factory) of an nxmem
// plugin, as an adapter the suites certify.
//
// The plugin supplies the allocator and its own deferred release. Pins are
// the host's side of the ABI, so the provider contexts the registry suites
// bind through are the kit's reference ones and a plugin never declares the
// pins profile. Through the ABI alone the kit certifies host-tier memory:
// the allocator contract (profile core), and virtual backing, shared mapping
// and deferred release when the factory declares them, each judged on what
// the ABI lets the kit observe (the requirements needing a control the ABI
// lacks are reported out of nxmem scope, never passed silently). A plugin
// that exports the kit's control extension (ortmem_cts_controls.h) brings
// those requirements into scope, control by control, and with MEMORY_ACCESS
// a tier other than host.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/host_adapter.hpp"
#include "plugin/plugin_controls.hpp"
#include "plugin/plugin_module.hpp"
#include "ortmem/expected.hpp"

namespace ortmem::adapters {

// Whether an --adapter argument names a plugin file rather than a compiled-in
// adapter: it has a slash, or ends in ".so", optionally followed by #NAME.
[[nodiscard]] bool names_a_plugin(const std::string& spec);

struct PluginSelection {
  std::shared_ptr<plugin::PluginModule> module;
  std::vector<std::string> adapters;  // the registered adapter names ("path#MECHANISM"), one per selected mechanism
};

// Loads the plugin `spec` names ("path.so" or "path.so#MECHANISM"), checks
// that each selected mechanism opens an allocator that passes the ABI's
// rules, and registers one adapter per selected mechanism under
// "path#MECHANISM". The error is one line for people: what was wrong, what
// to do.
[[nodiscard]] Expected<PluginSelection, std::string> register_plugin_adapters(const std::string& spec,
                                                                              plugin::HostRange host = {});

// What the kit requires when it opens an allocator of `factory`: every
// capability the factory declares that the kit certifies through its own
// interfaces. (STRUCTURED_RELEASE is a way of releasing, chosen by the
// negotiated minor, not a capability an open requires.)
[[nodiscard]] std::uint64_t required_capabilities(const plugin::Factory& factory);

// The module and factory behind an adapter register_plugin_adapters made,
// for the ABI probes that call the plugin raw (conformance/suites/abi_suite.cpp);
// nullopt for any other adapter.
struct PluginUnderTest {
  std::shared_ptr<plugin::PluginModule> module;
  plugin::Factory factory;
};
[[nodiscard]] std::optional<PluginUnderTest> plugin_under_test(const cts::Adapter& adapter);

// The kit's controls a control table offers, by name: "fences, queue-close".
[[nodiscard]] std::string control_names(const plugin::Controls& controls);

// The capability bits a plugin declares that the kit cannot yet certify
// through the ABI, by name; empty when everything declared is certified.
[[nodiscard]] std::string uncertified_capabilities(std::uint64_t flags);

}  // namespace ortmem::adapters
