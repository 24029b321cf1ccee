// A status is 264 bytes a plugin filled: the reader must stay inside them
// and keep only well-formed text, whatever message_len and the bytes claim.
#include "plugin/plugin_status.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace ortmem::plugin {
namespace {

NxmemStatus raw_status(std::uint32_t code, std::string_view text, std::uint32_t claimed_length) {
  NxmemStatus raw{};
  raw.code = code;
  raw.message_len = claimed_length;
  std::memcpy(raw.message, text.data(), std::min<std::size_t>(text.size(), sizeof raw.message));
  return raw;
}

TEST(PluginStatus, ReadsTheMessageUpToItsLength) {
  const PluginStatus status = read_status(raw_status(NXMEM_STATUS_OUT_OF_MEMORY, "no room here", 7));
  EXPECT_EQ(status.code, NXMEM_STATUS_OUT_OF_MEMORY);
  EXPECT_EQ(status.message, "no room");
  EXPECT_EQ(status.describe(), "OUT_OF_MEMORY: no room");
}

TEST(PluginStatus, NeverReadsPast255BytesWhateverTheLengthClaims) {
  NxmemStatus raw = raw_status(NXMEM_STATUS_BUSY, std::string(256, 'x'), 100000);
  const PluginStatus status = read_status(raw);
  EXPECT_EQ(status.message.size(), NXMEM_STATUS_MESSAGE_MAX) << "the 256th byte is the terminator's, never text";
}

TEST(PluginStatus, StopsAtTheFirstNul) {
  EXPECT_EQ(read_status(raw_status(NXMEM_STATUS_BUSY, std::string("ab\0cd", 5), 5)).message, "ab");
}

TEST(PluginStatus, KeepsNoMessageThatIsNotUtf8) {
  EXPECT_EQ(read_status(raw_status(NXMEM_STATUS_BUSY, "bad \xff byte", 10)).message, "");
  EXPECT_EQ(read_status(raw_status(NXMEM_STATUS_BUSY, "caf\xc3\xa9", 5)).message, "caf\xc3\xa9");
}

TEST(PluginStatus, UnknownCodesAreNamedAsSuch) {
  EXPECT_EQ(status_code_name(NXMEM_STATUS_WRONG_MECHANISM), "WRONG_MECHANISM");
  EXPECT_EQ(status_code_name(99), "UNKNOWN(99)");
}

}  // namespace
}  // namespace ortmem::plugin
