// unicode::ToValidUtf8: bytes to the text a client receives for them, U+FFFD per maximal ill-formed
// subpart. The expected strings are Python 3's bytes.decode("utf-8", "replace"); nlohmann's JSON
// writer (what serializes every response) must agree with it, and valid UTF-8 passes unchanged.
#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <utility>
#include <vector>

namespace ember {
namespace {

const std::vector<std::pair<std::string, std::string>>& PythonCases() {
  static const auto* cases = new std::vector<std::pair<std::string, std::string>>{
      {"plain", "plain"},
      {"\xFF", "\xEF\xBF\xBD"},
      {"a\x80" "b", "a\xEF\xBF\xBD" "b"},
      {"\xE2\x82", "\xEF\xBF\xBD"},
      {"\xE2\x82x", "\xEF\xBF\xBDx"},
      {"\xE2\x82\xAC", "\xE2\x82\xAC"},
      {"\xE0\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xF0\x9F\x98", "\xEF\xBF\xBD"},
      {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},
      {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xC3\xA9\xC3", "\xC3\xA9\xEF\xBF\xBD"},
      {"\xF1\x80\x80\xE2\x82\xAC", "\xEF\xBF\xBD\xE2\x82\xAC"},
      {"\xFE\xFE\xFF", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"ok\xE2\x82\xE2\x82\xAC\x80", "ok\xEF\xBF\xBD\xE2\x82\xAC\xEF\xBF\xBD"},
  };
  return *cases;
}

std::string JsonWriterText(const std::string& bytes) {
  // What a client parses out of a response holding `bytes` as a string.
  const std::string dumped =
      nlohmann::json(bytes).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return nlohmann::json::parse(dumped).get<std::string>();
}

TEST(ToValidUtf8Test, ReplacesAsPythonDoes) {
  for (const auto& [in, want] : PythonCases()) {
    EXPECT_EQ(unicode::ToValidUtf8(in), want) << testing::PrintToString(in);
  }
}

TEST(ToValidUtf8Test, AgreesWithTheJsonWriterAndKeepsValidText) {
  for (const auto& [in, want] : PythonCases()) EXPECT_EQ(JsonWriterText(in), want) << testing::PrintToString(in);
  std::mt19937 rng(7);
  const std::string alphabet[] = {"a", " ", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\x80", "\xBF", "\xC3",
                                  "\xE2\x82", "\xED", "\xA0", "\xF4", "\x90", "\xFF", "\xC0"};
  for (int n = 0; n < 3000; ++n) {
    std::string s;
    for (int k = rng() % 12; k > 0; --k) s += alphabet[rng() % std::size(alphabet)];
    const std::string fixed = unicode::ToValidUtf8(s);
    ASSERT_EQ(fixed, JsonWriterText(s)) << testing::PrintToString(s);
    ASSERT_EQ(unicode::ToValidUtf8(fixed), fixed);  // the output is valid UTF-8
  }
}

}  // namespace
}  // namespace ember
