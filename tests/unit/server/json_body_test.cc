#include "server/protocol/json_body.h"

#include <gtest/gtest.h>

#include <string>

namespace ember::server {
namespace {

using json = nlohmann::ordered_json;

ApiError Err(std::string_view text, int max_depth = kMaxJsonDepth) {
  auto parsed = ParseJsonObject(text, max_depth);
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed)) << text.substr(0, 80);
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError{};
}

// The error reply must be writable as JSON (no raw request bytes in it).
void ExpectSafe(const ApiError& e) {
  EXPECT_EQ(e.http_status, 400);
  EXPECT_FALSE(e.message.empty());
  EXPECT_NO_THROW((void)e.ToJson().dump());
}

TEST(JsonBodyTest, ParsesObjectsKeepingKeyOrder) {
  auto parsed = ParseJsonObject(R"({"z": 1, "a": [1, {"b": null}], "m": "x"})");
  ASSERT_TRUE(std::holds_alternative<json>(parsed));
  const json& body = std::get<json>(parsed);
  EXPECT_EQ(body.begin().key(), "z");
  EXPECT_EQ(body["a"][1]["b"], nullptr);
}

TEST(JsonBodyTest, EmptyAndNonObjectBodies) {
  EXPECT_NE(Err("").message.find("empty"), std::string::npos);
  EXPECT_NE(Err("[1, 2]").message.find("JSON object"), std::string::npos);
  EXPECT_NE(Err("3").message.find("JSON object"), std::string::npos);
}

TEST(JsonBodyTest, DepthIsBoundedWithoutBuildingTheDeepValue) {
  // At the limit: fine.
  std::string ok = "{\"a\": " + std::string(kMaxJsonDepth - 1, '[') + std::string(kMaxJsonDepth - 1, ']') + "}";
  EXPECT_TRUE(std::holds_alternative<json>(ParseJsonObject(ok)));
  // One deeper, and far deeper (which would overflow the stack of anything that recursed).
  for (size_t depth : {size_t{kMaxJsonDepth}, size_t{1} << 20}) {
    const std::string deep = "{\"messages\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
    const ApiError e = Err(deep);
    ExpectSafe(e);
    EXPECT_NE(e.message.find("deeper than 128 levels"), std::string::npos) << e.message;
    EXPECT_EQ(e.param, "messages");
  }
  // Unclosed: still the depth error, not a syntax error at the end.
  EXPECT_NE(Err(std::string(1 << 20, '[')).message.find("deeper"), std::string::npos);
  EXPECT_NE(Err(R"({"a": {"b": {}}})", 2).message.find("deeper than 2"), std::string::npos);
}

TEST(JsonBodyTest, NumbersThatOverflowNameTheField) {
  const ApiError e = Err(R"({"model": "m", "temperature": 1e999})");
  ExpectSafe(e);
  EXPECT_EQ(e.param, "temperature");
  EXPECT_NE(e.message.find("'temperature'"), std::string::npos) << e.message;
  const ApiError nested = Err(R"({"messages": [{"role": "user"}, {"role": "user", "x": -1e400}]})");
  EXPECT_EQ(nested.param, "messages");
  EXPECT_NE(nested.message.find("'messages[1].x'"), std::string::npos) << nested.message;
  // Integers past 64 bits are doubles, not errors; field readers then refuse them by range.
  EXPECT_TRUE(std::holds_alternative<json>(ParseJsonObject(R"({"n": 123456789012345678901234567890})")));
}

TEST(JsonBodyTest, InvalidUtf8NamesTheFieldAndQuotesNoBytes) {
  const ApiError e = Err("{\"prompt\": \"abc\xFF\xFE\"}");
  ExpectSafe(e);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find("UTF-8"), std::string::npos);
  EXPECT_NE(e.message.find("'prompt'"), std::string::npos) << e.message;
  EXPECT_EQ(e.message.find('\xFF'), std::string::npos);
  const ApiError in_key = Err("{\"model\": \"m\", \"\xC3\": 1}");
  ExpectSafe(in_key);
  EXPECT_NE(in_key.message.find("in a key"), std::string::npos) << in_key.message;
  const ApiError lone_surrogate = Err(R"({"prompt": "\ud800"})");
  ExpectSafe(lone_surrogate);
  EXPECT_EQ(lone_surrogate.param, "prompt");
}

TEST(JsonBodyTest, SyntaxErrorsSayWhereWithoutEchoingTheRequest) {
  const ApiError e = Err("{\"model\": \"m\", \"prompt\": \x01\x02\x1B[2J}");
  ExpectSafe(e);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find("byte "), std::string::npos);
  EXPECT_EQ(e.message.find("last read"), std::string::npos) << e.message;
  EXPECT_EQ(e.message.find('\x1B'), std::string::npos) << e.message;
  const ApiError truncated = Err(R"({"model": "m", "prompt": )");
  ExpectSafe(truncated);
  EXPECT_NE(truncated.message.find("not valid JSON"), std::string::npos);
  const ApiError in_array = Err(R"({"prompt": [1, 2, nope]})");
  EXPECT_NE(in_array.message.find("'prompt[2]'"), std::string::npos) << in_array.message;
}

}  // namespace
}  // namespace ember::server
