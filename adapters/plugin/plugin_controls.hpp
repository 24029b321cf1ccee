// adapters/plugin/plugin_controls.hpp: the ortmem-cts control extension of
// one plugin mechanism, read and validated (adapters/plugin/include/nxmem/ortmem_cts_controls.h
// is the extension's contract for plugin authors; spec/controls.md its rules).
//
// The table is read once, when the plugin is loaded, into a zeroed local
// copy of at most the bytes the kit knows, exactly like the ABI's own
// vtables: the plugin's bytes are never read again. A table that breaks a
// load rule refuses the whole plugin, since a control the kit cannot trust
// would turn every check that uses it into a check of nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nxmem/ortmem_cts_controls.h"
#include "plugin/plugin_status.hpp"
#include "ortmem/expected.hpp"

namespace ortmem::plugin {

class Controls {
 public:
  // The table `entry` gives for `mechanism_id`, checked against the load
  // rules; `factory_flags` are the factory's capability bits. nullopt when
  // the plugin exports no entry or offers no control for this mechanism.
  // The error is one line: the rule, the field, what to do.
  [[nodiscard]] static Expected<std::optional<Controls>, std::string> load(OrtmemCtsPluginControlsFn entry,
                                                                           std::uint64_t mechanism_id,
                                                                           std::uint64_t factory_flags);

  [[nodiscard]] bool offers(std::uint64_t control) const noexcept { return (table_.controls & control) != 0; }
  [[nodiscard]] bool offers_queue_controls() const noexcept { return offers(kQueueControls); }
  [[nodiscard]] bool offers_write_probe() const noexcept { return table_.probe_write != nullptr; }

  // Each slot of an offered control, on the allocator whose vtable ctx is
  // `ctx`; the plugin's answer, read without trusting it.
  [[nodiscard]] PluginStatus open_queue(void* ctx, std::uint64_t capacity) const;
  [[nodiscard]] PluginStatus record_use(void* ctx) const;
  [[nodiscard]] PluginStatus signal_fences(void* ctx) const;
  [[nodiscard]] PluginStatus close_queue(void* ctx) const;
  [[nodiscard]] PluginStatus lose_device(void* ctx) const;
  [[nodiscard]] PluginStatus arm_fault(void* ctx, std::uint32_t point, std::uint64_t nth) const;
  [[nodiscard]] PluginStatus clear_faults(void* ctx) const;
  [[nodiscard]] PluginStatus fill(void* ctx, void* address, std::uint64_t bytes, std::uint8_t value) const;
  [[nodiscard]] PluginStatus read(void* ctx, const void* address, std::uint8_t* out, std::uint64_t bytes) const;
  // The outcome (ORTMEM_CTS_WRITE_*) on OK; only when offers_write_probe().
  [[nodiscard]] PluginStatus probe_write(void* ctx, void* address, std::uint8_t value, std::uint32_t& outcome) const;

  static constexpr std::uint64_t kQueueControls = ORTMEM_CTS_CONTROL_FENCES | ORTMEM_CTS_CONTROL_QUEUE_CLOSE |
                                                  ORTMEM_CTS_CONTROL_QUEUE_CAPACITY |
                                                  ORTMEM_CTS_CONTROL_QUEUE_DEVICE_LOSS;

 private:
  explicit Controls(const OrtmemCtsControls& table) : table_(table) {}
  OrtmemCtsControls table_;
};

}  // namespace ortmem::plugin
