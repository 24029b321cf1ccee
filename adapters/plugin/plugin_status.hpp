// adapters/plugin/plugin_status.hpp: an NxmemStatus a plugin wrote, read
// without trusting it.
//
// A status crosses the boundary as 264 bytes the plugin filled. The reader
// takes at most 255 message bytes whatever message_len claims, stops at the
// first NUL, and keeps no message at all when the bytes are not UTF-8, so a
// plugin's bad status can never make the kit read past the buffer or print
// garbage into a report.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "nxmem/nxmem_abi.h"

namespace ortmem::plugin {

struct PluginStatus {
  std::uint32_t code = NXMEM_STATUS_OK;
  std::string message;  // empty when the plugin gave none, or gave bytes that are not UTF-8

  [[nodiscard]] bool ok() const noexcept { return code == NXMEM_STATUS_OK; }
  // "OUT_OF_MEMORY: aligned_alloc refused", or the code alone.
  [[nodiscard]] std::string describe() const;
};

[[nodiscard]] PluginStatus read_status(const NxmemStatus& raw);

// The ABI's name for a code: "OK", "SHORT_STRUCT", ..., "UNKNOWN(n)".
[[nodiscard]] std::string status_code_name(std::uint32_t code);

}  // namespace ortmem::plugin
