// The OpenAPI request schemas and the parsers come from the same field tables; these tests hold
// them to it: every documented field is read by its parser, and every bound the document states
// is the parser's bound, on both sides of it.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "server/protocol/requests.h"
#include "server/routes/routes.h"

namespace ember::server {
namespace {

using json = nlohmann::ordered_json;

struct Api {
  const char* name;
  json schema;
  json base;  // a valid body
  std::function<std::optional<ApiError>(const json&)> parse;
};

template <typename T>
std::optional<ApiError> ErrorOf(const std::variant<T, ApiError>& parsed) {
  if (const ApiError* e = std::get_if<ApiError>(&parsed)) return *e;
  return std::nullopt;
}

std::vector<Api> Apis() {
  return {
      {"completions", CompletionRequestSchema(), json{{"prompt", "x"}},
       [](const json& b) { return ErrorOf(ParseCompletionRequest(b)); }},
      {"chat", ChatCompletionRequestSchema(),
       json{{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"logprobs", true}},
       [](const json& b) { return ErrorOf(ParseChatCompletionRequest(b)); }},
      // /tokenize's two shapes, each its own schema (the oneOf's branches).
      {"tokenize (prompt)", TokenizeRequestSchema()["oneOf"][0], json{{"prompt", "x"}},
       [](const json& b) { return ErrorOf(ParseTokenizeRequest(b)); }},
      {"tokenize (messages)", TokenizeRequestSchema()["oneOf"][1],
       json{{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"add_generation_prompt", true}},
       [](const json& b) { return ErrorOf(ParseTokenizeRequest(b)); }},
      {"detokenize", DetokenizeRequestSchema(), json{{"tokens", {1}}},
       [](const json& b) { return ErrorOf(ParseDetokenizeRequest(b)); }},
  };
}

bool Names(const std::optional<ApiError>& e, const std::string& field) {
  return e && e->http_status == 400 && e->param.rfind(field, 0) == 0;
}

TEST(OpenApiRequestSchemaTest, BaseBodiesAreValid) {
  for (const Api& api : Apis()) EXPECT_FALSE(api.parse(api.base).has_value()) << api.name;
}

TEST(OpenApiRequestSchemaTest, EveryDocumentedFieldIsReadByTheParser) {
  // No field takes all of these; a field the parser never reads takes every one.
  const std::vector<json> wrong = {json{{"x", 1}}, "x", -1.5, json::array({json::array()})};
  for (const Api& api : Apis()) {
    ASSERT_TRUE(api.schema["properties"].is_object()) << api.name;
    for (const auto& [field, _] : api.schema["properties"].items()) {
      bool refused = false;
      for (const json& value : wrong) {
        json body = api.base;
        body[field] = value;
        refused = refused || Names(api.parse(body), field);
      }
      EXPECT_TRUE(refused) << api.name << ": '" << field << "' is documented but its parser takes anything";
    }
  }
}

TEST(OpenApiRequestSchemaTest, RequiredFieldsAreRequired) {
  for (const Api& api : Apis()) {
    ASSERT_FALSE(api.schema["required"].empty()) << api.name;
    for (const json& field : api.schema["required"]) {
      json body = api.base;
      body.erase(field.get<std::string>());
      EXPECT_TRUE(Names(api.parse(body), field.get<std::string>())) << api.name << " " << field;
      body[field.get<std::string>()] = nullptr;  // null reads as absent
      EXPECT_TRUE(Names(api.parse(body), field.get<std::string>())) << api.name << " " << field;
    }
  }
}

// The numbers just inside and just outside a bound, when they are exact as doubles.
std::optional<double> Beyond(double bound, double direction) {
  if (std::abs(bound) >= 0x1p53) return std::abs(bound) < 1e30 ? std::nullopt : std::optional(bound * 2);
  return bound + direction;
}

void CheckBounds(const Api& api, const std::string& field, const json& s, bool item) {
  auto parse = [&](double v) {
    json body = api.base;
    const json value = s["type"] == "integer" || (s["type"].is_array() && s["type"][0] == "integer")
                           ? json(static_cast<int64_t>(v))
                           : json(v);
    body[field] = item ? json::array({value}) : value;
    return api.parse(body);
  };
  auto check = [&](double at, bool at_ok, double beyond_direction) {
    EXPECT_EQ(!Names(parse(at), field), at_ok) << api.name << " " << field << " = " << at;
    if (auto out = Beyond(at, beyond_direction)) {
      EXPECT_TRUE(Names(parse(*out), field)) << api.name << " " << field << " = " << *out << " is accepted";
    }
  };
  if (s.contains("minimum")) check(s["minimum"].get<double>(), true, -1);
  if (s.contains("exclusiveMinimum")) {
    EXPECT_TRUE(Names(parse(s["exclusiveMinimum"].get<double>()), field)) << field;
  }
  if (s.contains("maximum") && s["maximum"].get<double>() < 0x1p63) check(s["maximum"].get<double>(), true, 1);
}

TEST(OpenApiRequestSchemaTest, DocumentedBoundsAreTheParsersBounds) {
  int checked = 0;
  for (const Api& api : Apis()) {
    for (const auto& [field, s] : api.schema["properties"].items()) {
      if (s.contains("minimum") || s.contains("exclusiveMinimum")) {
        CheckBounds(api, field, s, false);
        ++checked;
      }
      if (s.contains("items") && s["items"].contains("minimum")) {
        CheckBounds(api, field, s["items"], true);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(OpenApiDocumentTest, DeclaresTheBearerSchemeOnTheV1Routes) {
  ServerConfig config;
  config.api_key = "k";
  const json doc = OpenApiDocument(config);
  EXPECT_EQ(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
  for (const auto& [path, item] : doc["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      const bool v1 = path.rfind("/v1", 0) == 0;
      EXPECT_EQ(op.contains("security"), v1) << path;
      EXPECT_EQ(op["responses"].contains("401"), v1) << path;
      EXPECT_TRUE(op["responses"].contains("200")) << path;
      EXPECT_TRUE(op["responses"]["405"]["headers"].contains("Allow")) << path;
      if (op.contains("requestBody")) {
        const std::string ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"];
        EXPECT_TRUE(doc["components"]["schemas"].contains(ref.substr(ref.rfind('/') + 1))) << ref;
      }
    }
  }
  // Without a key the /v1 routes need none.
  const json open = OpenApiDocument(ServerConfig{});
  EXPECT_EQ(open["paths"]["/v1/models"]["get"]["security"][1], json::object());
}

TEST(OpenApiDocumentTest, DefaultsAreTheServersDefaults) {
  ServerConfig config;
  config.default_sampling.temperature = 0.25f;
  const json schemas = OpenApiDocument(config)["components"]["schemas"];
  EXPECT_EQ(schemas["ChatCompletionRequest"]["properties"]["temperature"]["default"], 0.25);
  EXPECT_EQ(schemas["CompletionRequest"]["properties"]["temperature"]["default"], 0.25);
}

// The server's own limits (--max-n, the context, the vocabulary) are in its document.
TEST(OpenApiDocumentTest, ServerLimitsCapTheParsersRanges) {
  ServerConfig config;
  config.max_n = 3;
  config.max_model_len = 100;
  const json schemas = OpenApiDocument(config, /*vocab_size=*/50)["components"]["schemas"];
  const json& completion = schemas["CompletionRequest"]["properties"];
  EXPECT_EQ(completion["n"]["maximum"], 3);
  EXPECT_EQ(completion["max_tokens"]["maximum"], 99);
  EXPECT_EQ(completion["stop_token_ids"]["items"]["maximum"], 49);
  EXPECT_EQ(completion["prompt"]["anyOf"][1]["items"]["maximum"], 49);
  EXPECT_EQ(schemas["ChatCompletionRequest"]["properties"]["max_completion_tokens"]["maximum"], 99);
  EXPECT_EQ(schemas["DetokenizeRequest"]["properties"]["tokens"]["items"]["maximum"], 49);
}

// stream_options, top_logprobs and continue_final_message depend on another field, in the parser
// and in the schema (an if/then).
TEST(OpenApiRequestSchemaTest, DependentFieldsAreDeclared) {
  const json chat = ChatCompletionRequestSchema();
  std::vector<std::string> dependent;
  for (const json& rule : chat["allOf"]) dependent.push_back(rule["if"]["required"][0]);
  EXPECT_EQ(dependent, (std::vector<std::string>{"stream_options", "continue_final_message", "top_logprobs"}));
  const json hi = json::array({{{"role", "user"}, {"content", "hi"}}});
  auto error = [&](json body) {
    body["messages"] = hi;
    return ErrorOf(ParseChatCompletionRequest(body));
  };
  EXPECT_TRUE(Names(error({{"stream_options", json::object()}}), "stream_options"));
  EXPECT_FALSE(error({{"stream_options", json::object()}, {"stream", true}}));
  EXPECT_FALSE(error({{"stream_options", nullptr}}));
  EXPECT_TRUE(Names(error({{"top_logprobs", 0}}), "top_logprobs"));
  EXPECT_FALSE(error({{"top_logprobs", 0}, {"logprobs", true}}));
  EXPECT_TRUE(Names(error({{"continue_final_message", true}}), "continue_final_message"));
  EXPECT_FALSE(error({{"continue_final_message", false}}));
}

// /tokenize is vLLM's two shapes, a oneOf whose branches exclude each other the way the parser
// does: the field that picks one shape is refused (documented as null) in the other, and a
// conversation's fields and defaults are the chat request's (one table, ChatPromptFields).
TEST(OpenApiRequestSchemaTest, TokenizeShapesAreTheParsersShapes) {
  const json schema = TokenizeRequestSchema();
  ASSERT_EQ(schema["oneOf"].size(), 2u);
  const json& prompt = schema["oneOf"][0];
  const json& chat = schema["oneOf"][1];
  EXPECT_EQ(prompt["required"], json::array({"prompt"}));
  EXPECT_EQ(chat["required"], json::array({"messages"}));
  EXPECT_EQ(prompt["properties"]["messages"]["type"], "null");
  EXPECT_EQ(chat["properties"]["prompt"]["type"], "null");
  EXPECT_EQ(prompt["properties"]["add_special_tokens"]["default"], true);
  EXPECT_EQ(chat["properties"]["add_special_tokens"]["default"], false);
  EXPECT_EQ(chat["properties"]["return_token_strs"]["default"], false);
  const json chat_request = ChatCompletionRequestSchema();
  for (const char* f : {"messages", "tools", "add_generation_prompt", "continue_final_message", "chat_template_kwargs"}) {
    EXPECT_EQ(chat["properties"][f], chat_request["properties"][f]) << f;
  }
  EXPECT_FALSE(chat["properties"].contains("tool_choice"));  // generation only
  EXPECT_EQ(chat["allOf"][0]["if"]["required"][0], "continue_final_message");

  const json hi = json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_TRUE(Names(ErrorOf(ParseTokenizeRequest({{"prompt", "x"}, {"messages", hi}})), "prompt"));
  EXPECT_FALSE(ErrorOf(ParseTokenizeRequest({{"prompt", nullptr}, {"messages", hi}})));
  EXPECT_FALSE(ErrorOf(ParseTokenizeRequest({{"prompt", "x"}, {"messages", nullptr}})));
  // Neither: 'prompt' is missing, unless a conversation's field says a chat was meant.
  EXPECT_TRUE(Names(ErrorOf(ParseTokenizeRequest(json::object())), "prompt"));
  EXPECT_TRUE(Names(ErrorOf(ParseTokenizeRequest({{"add_generation_prompt", false}})), "messages"));
  // The chat request's echo and tool_choice are not /tokenize's: ignored like any unknown field.
  EXPECT_FALSE(ErrorOf(ParseTokenizeRequest({{"messages", hi}, {"tool_choice", 3}})));
}

}  // namespace
}  // namespace ember::server
