#include "plugin/plugin_status.hpp"

#include <array>
#include <cstring>

#include "ortmem/report/utf8.hpp"

namespace ortmem::plugin {

std::string status_code_name(std::uint32_t code) {
  static constexpr std::array<const char*, NXMEM_STATUS_LAST_KNOWN + 1> kNames = {"OK",
                                                                                  "VERSION_MISMATCH",
                                                                                  "SHORT_STRUCT",
                                                                                  "UNSUPPORTED_CAPABILITY",
                                                                                  "INVALID_ARGUMENT",
                                                                                  "INTERNAL_ERROR",
                                                                                  "NOT_IMPLEMENTED",
                                                                                  "DEVICE_ERROR",
                                                                                  "OUT_OF_MEMORY",
                                                                                  "WRONG_DEVICE",
                                                                                  "WRONG_MECHANISM",
                                                                                  "UNKNOWN_ALLOCATION",
                                                                                  "RELEASE_QUARANTINED",
                                                                                  "CALLBACK_FAILED",
                                                                                  "BUSY"};
  if (code < kNames.size()) return kNames[code];
  return "UNKNOWN(" + std::to_string(code) + ")";
}

PluginStatus read_status(const NxmemStatus& raw) {
  PluginStatus status{raw.code, {}};
  std::size_t length = raw.message_len < NXMEM_STATUS_MESSAGE_MAX ? raw.message_len : NXMEM_STATUS_MESSAGE_MAX;
  const auto* bytes = reinterpret_cast<const char*>(raw.message);
  if (const void* nul = std::memchr(bytes, '\0', length)) length = static_cast<const char*>(nul) - bytes;
  const std::string_view text(bytes, length);
  if (report::is_utf8(text)) status.message = text;
  return status;
}

std::string PluginStatus::describe() const {
  std::string out = status_code_name(code);
  if (!message.empty()) out += ": " + message;
  return out;
}

}  // namespace ortmem::plugin
