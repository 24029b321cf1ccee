// Well-formed UTF-8 is the one text the kit keeps from outside: plugin
// messages, report strings, XML.
#include "ortmem/report/utf8.hpp"

#include <gtest/gtest.h>

namespace ortmem::report {
namespace {

TEST(Utf8, MeansWellFormed) {
  EXPECT_TRUE(is_utf8(""));
  EXPECT_TRUE(is_utf8("plain ascii"));
  EXPECT_TRUE(is_utf8("\xf0\x9f\x98\x80"));
  EXPECT_FALSE(is_utf8("\xc0\xaf")) << "overlong";
  EXPECT_FALSE(is_utf8("\xed\xa0\x80")) << "a surrogate";
  EXPECT_FALSE(is_utf8("\xf4\x90\x80\x80")) << "above U+10FFFF";
  EXPECT_FALSE(is_utf8("\xe2\x82")) << "cut short";
  EXPECT_FALSE(is_utf8("ok \xff")) << "a stray byte after good text";
}

TEST(Utf8, DecodesOneSequence) {
  std::uint32_t code_point = 0;
  EXPECT_EQ(utf8_sequence("\xc3\xa9x", code_point), 2U);
  EXPECT_EQ(code_point, 0xE9U);
  EXPECT_EQ(utf8_sequence("\x80", code_point), 0U) << "a continuation byte cannot lead";
}

}  // namespace
}  // namespace ortmem::report
