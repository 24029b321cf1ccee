#include "plugin/plugin_controls.hpp"

#include <array>
#include <cstdio>
#include <cstring>

#include "plugin/plugin_module.hpp"

namespace ortmem::plugin {
namespace {

std::string hex(std::uint64_t value) {
  std::array<char, 19> text{};
  std::snprintf(text.data(), text.size(), "0x%llx", static_cast<unsigned long long>(value));
  return text.data();
}

// A control bit and the slots that make it up: the bit is set exactly when
// every one of its slots is (open_queue is checked on its own: it belongs to
// all four queue controls).
struct Slots {
  std::uint64_t bit;
  const char* bit_name;
  std::array<std::pair<const char*, bool>, 2> slots;  // name, present; a null name ends the list
};

Expected<void, std::string> check_slots(const OrtmemCtsControls& table) {
  const Slots rules[] = {
      {ORTMEM_CTS_CONTROL_FENCES,
       "FENCES",
       {{{"record_use", table.record_use != nullptr}, {"signal_fences", table.signal_fences != nullptr}}}},
      {ORTMEM_CTS_CONTROL_QUEUE_CLOSE, "QUEUE_CLOSE", {{{"close_queue", table.close_queue != nullptr}, {}}}},
      {ORTMEM_CTS_CONTROL_QUEUE_DEVICE_LOSS,
       "QUEUE_DEVICE_LOSS",
       {{{"lose_device", table.lose_device != nullptr}, {}}}},
      {ORTMEM_CTS_CONTROL_FAULT_INJECTION,
       "FAULT_INJECTION",
       {{{"arm_fault", table.arm_fault != nullptr}, {"clear_faults", table.clear_faults != nullptr}}}},
      {ORTMEM_CTS_CONTROL_MEMORY_ACCESS,
       "MEMORY_ACCESS",
       {{{"fill", table.fill != nullptr}, {"read", table.read != nullptr}}}},
  };
  for (const Slots& rule : rules) {
    const bool offered = (table.controls & rule.bit) != 0;
    for (const auto& [name, present] : rule.slots) {
      if (name == nullptr || present == offered) continue;
      return fail(std::string("controls: ") + name + (present ? " is set though " : " is NULL though ") +
                  rule.bit_name + (present ? " is not offered" : " is offered") +
                  "; set a control's bit exactly when its slots are set");
    }
  }
  const bool queue = (table.controls & Controls::kQueueControls) != 0;
  if ((table.open_queue != nullptr) != queue) {
    return fail(std::string("controls: open_queue is ") +
                (queue ? "NULL though a queue control is offered" : "set though no queue control is offered") +
                "; every queue control (FENCES, QUEUE_CLOSE, QUEUE_CAPACITY, QUEUE_DEVICE_LOSS) needs it");
  }
  if (table.probe_write != nullptr && (table.controls & ORTMEM_CTS_CONTROL_MEMORY_ACCESS) == 0) {
    return fail(std::string("controls: probe_write is set though MEMORY_ACCESS is not offered"));
  }
  return {};
}

}  // namespace

Expected<std::optional<Controls>, std::string> Controls::load(OrtmemCtsPluginControlsFn entry,
                                                              std::uint64_t mechanism_id, std::uint64_t factory_flags) {
  if (entry == nullptr) return std::optional<Controls>{};
  const std::string call = std::string(ORTMEM_CTS_CONTROLS_EXPORT) + "(" + std::to_string(ORTMEM_CTS_CONTROLS_VERSION) +
                           ", " + hex(mechanism_id) + ")";
  const OrtmemCtsControls* raw = nullptr;
  const PluginStatus status = read_status(entry(ORTMEM_CTS_CONTROLS_VERSION, mechanism_id, &raw));
  if (status.code == NXMEM_STATUS_NOT_IMPLEMENTED) return std::optional<Controls>{};
  if (!status.ok()) {
    return fail("controls: " + call + " answered " + status.describe() +
                "; answer OK with a table, or NOT_IMPLEMENTED for a mechanism without controls");
  }
  if (!readable_struct(raw)) return fail("controls: " + call + " gave a NULL or misaligned table");
  // The size first, from the plugin's bytes: never copy more than it wrote.
  std::uint32_t size = 0;
  std::memcpy(&size, raw, sizeof size);
  if (size < ORTMEM_CTS_CONTROLS_SIZE_V1) {
    return fail("controls: struct_size is " + std::to_string(size) + ", but version 1 needs " +
                std::to_string(ORTMEM_CTS_CONTROLS_SIZE_V1) + " bytes");
  }
  OrtmemCtsControls table{};
  std::memcpy(&table, raw, sizeof table);
  if (table.version < 1) return fail("controls: version is 0; the first version is 1");
  if (table.mechanism_id != mechanism_id) {
    return fail("controls: mechanism_id is " + hex(table.mechanism_id) + ", not the mechanism's " + hex(mechanism_id) +
                " it was asked for");
  }
  if (table.reserved != 0) return fail("controls: reserved is " + hex(table.reserved) + ", must be 0");
  if ((table.controls & ~ORTMEM_CTS_CONTROL_KNOWN_MASK) != 0) {
    return fail("controls: controls " + hex(table.controls) + " has bits outside " +
                hex(ORTMEM_CTS_CONTROL_KNOWN_MASK) + "; offer only controls version 1 defines");
  }
  if (auto slots = check_slots(table); !slots) return fail(slots.error());
  if ((table.controls & kQueueControls) != 0 && (factory_flags & NXMEM_CAP_DEFERRED_RELEASE) == 0) {
    return fail("controls: controls " + hex(table.controls) +
                " offers queue controls, but the factory does not declare DEFERRED_RELEASE");
  }
  if (table.controls == 0) return std::optional<Controls>{};
  return std::optional<Controls>{Controls(table)};
}

PluginStatus Controls::open_queue(void* ctx, std::uint64_t capacity) const {
  return read_status(table_.open_queue(ctx, capacity));
}
PluginStatus Controls::record_use(void* ctx) const { return read_status(table_.record_use(ctx)); }
PluginStatus Controls::signal_fences(void* ctx) const { return read_status(table_.signal_fences(ctx)); }
PluginStatus Controls::close_queue(void* ctx) const { return read_status(table_.close_queue(ctx)); }
PluginStatus Controls::lose_device(void* ctx) const { return read_status(table_.lose_device(ctx)); }
PluginStatus Controls::arm_fault(void* ctx, std::uint32_t point, std::uint64_t nth) const {
  return read_status(table_.arm_fault(ctx, point, nth));
}
PluginStatus Controls::clear_faults(void* ctx) const { return read_status(table_.clear_faults(ctx)); }
PluginStatus Controls::fill(void* ctx, void* address, std::uint64_t bytes, std::uint8_t value) const {
  return read_status(table_.fill(ctx, static_cast<std::uint8_t*>(address), bytes, value));
}
PluginStatus Controls::read(void* ctx, const void* address, std::uint8_t* out, std::uint64_t bytes) const {
  return read_status(table_.read(ctx, static_cast<const std::uint8_t*>(address), out, bytes));
}
PluginStatus Controls::probe_write(void* ctx, void* address, std::uint8_t value, std::uint32_t& outcome) const {
  return read_status(table_.probe_write(ctx, static_cast<std::uint8_t*>(address), value, &outcome));
}

}  // namespace ortmem::plugin
