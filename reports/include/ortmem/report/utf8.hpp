// ortmem/report/utf8.hpp: well-formed UTF-8, decoded one sequence at a time.
//
// Text that crosses into a report, an XML file or the kit from a plugin is
// checked here: no overlong forms, no surrogates, nothing above U+10FFFF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ortmem::report {

// The length of the well-formed sequence at the start of `text` (setting
// `code_point`), or 0 when it is not one.
[[nodiscard]] std::size_t utf8_sequence(std::string_view text, std::uint32_t& code_point) noexcept;

// Whether all of `text` is well-formed UTF-8.
[[nodiscard]] bool is_utf8(std::string_view text) noexcept;

}  // namespace ortmem::report
