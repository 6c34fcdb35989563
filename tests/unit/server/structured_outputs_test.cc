// The request fields that ask for structured output, parsed into ConstraintSpecs: every spelling
// vLLM and OpenAI accept, and the 400s for what is malformed, ambiguous or not supported.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/protocol/requests.h"

namespace ember::server {
namespace {

using json = nlohmann::ordered_json;
using Kind = structured::ConstraintSpec::Kind;

std::optional<structured::ConstraintSpec> Parse(const std::string& extra, std::string* field = nullptr) {
  auto parsed = ParseCompletionRequest(json::parse(R"({"prompt": "x")" + extra + "}"));
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    ADD_FAILURE() << extra << ": " << e->message;
    return std::nullopt;
  }
  const CompletionRequest& c = std::get<CompletionRequest>(parsed);
  if (field) *field = c.common.constraint_field;
  return c.common.constraint;
}

ApiError Error(const std::string& extra) {
  auto parsed = ParseChatCompletionRequest(json::parse(R"({"messages": [{"role": "user", "content": "hi"}])" + extra + "}"));
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed)) << extra;
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError{};
}

TEST(StructuredOutputsParse, EverySpelling) {
  std::string field;
  auto s = Parse(R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer"}}})", &field);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, Kind::kJsonSchema);
  EXPECT_EQ(json::parse(s->text), json::parse(R"({"type": "integer"})"));
  EXPECT_EQ(field, "response_format");

  s = Parse(R"(, "response_format": {"type": "json_object"})");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, Kind::kJsonObject);
  EXPECT_FALSE(Parse(R"(, "response_format": {"type": "text"})").has_value());

  s = Parse(R"(, "structured_outputs": {"regex": "[a-z]+"})", &field);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, Kind::kRegex);
  EXPECT_EQ(s->text, "[a-z]+");
  EXPECT_EQ(field, "structured_outputs.regex");

  s = Parse(R"(, "structured_outputs": {"choice": ["yes", "no"]})");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, Kind::kChoice);
  EXPECT_EQ(s->choices, (std::vector<std::string>{"yes", "no"}));

  s = Parse(R"(, "structured_outputs": {"grammar": "root ::= \"a\""})");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, Kind::kGrammar);

  s = Parse(R"(, "structured_outputs": {"json": "{\"type\": \"string\"}"})");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, Kind::kJsonSchema);
  EXPECT_EQ(json::parse(s->text), json::parse(R"({"type": "string"})"));

  s = Parse(R"(, "guided_json": {"type": "boolean"})", &field);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, Kind::kJsonSchema);
  EXPECT_EQ(field, "guided_json");
  s = Parse(R"(, "guided_regex": "\\d+")");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, Kind::kRegex);
  EXPECT_EQ(s->text, "\\d+");
  s = Parse(R"(, "guided_choice": ["a"])");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, Kind::kChoice);
  s = Parse(R"(, "guided_grammar": "root ::= \"b\"")");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, Kind::kGrammar);
  EXPECT_FALSE(Parse("").has_value());
}

TEST(StructuredOutputsParse, MalformedAmbiguousOrUnsupportedIs400) {
  struct Case {
    std::string extra;
    std::string param;
  };
  for (const Case& c : {
           Case{R"(, "response_format": {"type": "json_schema"})", "response_format"},
           Case{R"(, "response_format": {"type": "json_schema", "json_schema": {"schema": 5}})", "response_format"},
           Case{R"(, "response_format": {"type": "yaml"})", "response_format"},
           Case{R"(, "structured_outputs": {"regex": ""})", "structured_outputs.regex"},
           Case{R"(, "structured_outputs": {"choice": []})", "structured_outputs.choice"},
           Case{R"(, "structured_outputs": {"choice": [1]})", "structured_outputs.choice"},
           Case{R"(, "structured_outputs": {"structural_tag": "x"})", "structured_outputs"},
           Case{R"(, "structured_outputs": 3)", "structured_outputs"},
           Case{R"(, "guided_json": "not json")", "guided_json"},
           Case{R"(, "guided_regex": "a", "guided_choice": ["b"])", "guided_choice"},
           Case{R"(, "response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"})",
                "structured_outputs.regex"},
       }) {
    const ApiError e = Error(c.extra);
    EXPECT_EQ(e.http_status, 400) << c.extra;
    EXPECT_EQ(e.param, c.param) << c.extra << " -> " << e.message;
  }
}

}  // namespace
}  // namespace ember::server
