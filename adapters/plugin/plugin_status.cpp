#include "adapters/plugin/plugin_status.hpp"

#include <array>
#include <cstring>

namespace ortmem::plugin {

std::string status_code_name(std::uint32_t code) {
  static constexpr std::array<const char*, NXMEM_STATUS_LAST_KNOWN + 1> kNames = {
      "OK",           "VERSION_MISMATCH", "SHORT_STRUCT", "UNSUPPORTED_CAPABILITY", "INVALID_ARGUMENT",
      "INTERNAL_ERROR", "NOT_IMPLEMENTED", "DEVICE_ERROR", "OUT_OF_MEMORY",         "WRONG_DEVICE",
      "WRONG_MECHANISM", "UNKNOWN_ALLOCATION", "RELEASE_QUARANTINED", "CALLBACK_FAILED", "BUSY"};
  if (code < kNames.size()) return kNames[code];
  return "UNKNOWN(" + std::to_string(code) + ")";
}

bool is_utf8(std::string_view bytes) noexcept {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    std::size_t length = 0;
    std::uint32_t point = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    }
    if ((lead & 0xE0) == 0xC0) {
      length = 2;
      point = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      point = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      point = lead & 0x07;
    } else {
      return false;
    }
    if (i + length > bytes.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(bytes[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      point = (point << 6) | (next & 0x3F);
    }
    static constexpr std::array<std::uint32_t, 5> kSmallest = {0, 0, 0x80, 0x800, 0x10000};
    if (point < kSmallest[length] || point > 0x10FFFF || (point >= 0xD800 && point <= 0xDFFF)) return false;
    i += length;
  }
  return true;
}

PluginStatus read_status(const NxmemStatus& raw) {
  PluginStatus status{raw.code, {}};
  std::size_t length = raw.message_len < NXMEM_STATUS_MESSAGE_MAX ? raw.message_len : NXMEM_STATUS_MESSAGE_MAX;
  const auto* bytes = reinterpret_cast<const char*>(raw.message);
  if (const void* nul = std::memchr(bytes, '\0', length)) length = static_cast<const char*>(nul) - bytes;
  const std::string_view text(bytes, length);
  if (is_utf8(text)) status.message = text;
  return status;
}

std::string PluginStatus::describe() const {
  std::string out = status_code_name(code);
  if (!message.empty()) out += ": " + message;
  return out;
}

}  // namespace ortmem::plugin
