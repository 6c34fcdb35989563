#include "server/protocol/safe_text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace ember::server {
namespace {

TEST(SafeTextTest, KeepsValidUtf8AndEscapesEverythingElse) {
  EXPECT_EQ(SafeText("gpt-4o"), "gpt-4o");
  EXPECT_EQ(SafeText("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  EXPECT_EQ(SafeText("a\xFF" "b"), "a\\xFFb");
  EXPECT_EQ(SafeText("\xC3"), "\\xC3");                        // cut mid-character
  EXPECT_EQ(SafeText("\xC0\xAF"), "\\xC0\\xAF");               // overlong '/'
  EXPECT_EQ(SafeText("\xED\xA0\x80"), "\\xED\\xA0\\x80");      // a surrogate
  EXPECT_EQ(SafeText("\xF4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(SafeText("line\nnext\ttab\x1B[31m"), "line\\nnext\\ttab\\x1B[31m");
  EXPECT_EQ(SafeText("\xC2\x9B" "2J"), "\\u009B2J");            // C1 CSI
  EXPECT_EQ(SafeText(std::string("a\0b", 3)), "a\\x00b");
}

TEST(SafeTextTest, CutsLongText) {
  const std::string out = SafeText(std::string(1 << 20, 'x'), 10);
  EXPECT_EQ(out, std::string(10, 'x') + "...");
  EXPECT_EQ(SafeText(std::string(10, 'x'), 10), std::string(10, 'x'));
}

// Whatever the bytes, the result goes into a JSON reply without the writer throwing.
TEST(SafeTextTest, EveryByteSequenceBecomesValidJsonText) {
  std::string all;
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; b += 7) {
      all += static_cast<char>(a);
      all += static_cast<char>(b);
    }
  }
  const std::string safe = SafeText(all, all.size() * 8);
  EXPECT_NO_THROW((void)nlohmann::json(safe).dump());
}

}  // namespace
}  // namespace ember::server
