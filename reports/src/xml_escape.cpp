#include <cstdint>

#include "ortmem/report/formats.hpp"
#include "ortmem/report/utf8.hpp"

namespace ortmem::report {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

bool xml_allows(std::uint32_t c) {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) || (c >= 0xE000 && c <= 0xFFFD) ||
         (c >= 0x10000 && c <= 0x10FFFF);
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  while (!text.empty()) {
    std::uint32_t code_point = 0;
    const std::size_t length = utf8_sequence(text, code_point);
    if (length == 0 || !xml_allows(code_point)) {
      escaped += kReplacement;
      text.remove_prefix(length == 0 ? 1 : length);
      continue;
    }
    switch (text.front()) {
      case '&': escaped += "&amp;"; break;
      case '<': escaped += "&lt;"; break;
      case '>': escaped += "&gt;"; break;
      case '"': escaped += "&quot;"; break;
      case '\'': escaped += "&#39;"; break;
      default: escaped.append(text.substr(0, length));
    }
    text.remove_prefix(length);
  }
  return escaped;
}

}  // namespace ortmem::report
