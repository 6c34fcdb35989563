#include "server/protocol/requests.h"

#include "server/protocol/kv_transfer_params.h"

#include <gtest/gtest.h>

namespace ember::server {
namespace {

using json = nlohmann::ordered_json;

template <typename T>
T Ok(const std::variant<T, ApiError>& parsed) {
  if (const ApiError* e = std::get_if<ApiError>(&parsed)) ADD_FAILURE() << e->message;
  return std::get<T>(parsed);
}

ApiError Err(const std::variant<CompletionRequest, ApiError>& parsed) {
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed));
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError{};
}
ApiError Err(const std::variant<ChatCompletionRequest, ApiError>& parsed) {
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed));
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError{};
}
ApiError Err(const std::variant<TokenizeRequest, ApiError>& parsed) {
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed));
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError{};
}

TEST(CompletionRequestTest, ReadsOpenAiAndVllmFields) {
  const json body = json::parse(R"({
    "model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
    "min_p": 0.05, "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
    "seed": 42, "n": 2, "stop": "END", "stop_token_ids": [5, 6], "ignore_eos": true, "min_tokens": 2,
    "logprobs": 3, "stream": true, "stream_options": {"include_usage": true}, "priority": -1,
    "cache_salt": "s", "user": "u", "unknown_field": 1})");
  const CompletionRequest c = Ok(ParseCompletionRequest(body));
  const SamplingParams& s = c.common.sampling;
  EXPECT_EQ(c.common.model, "m");
  ASSERT_EQ(c.prompts.size(), 1u);
  EXPECT_EQ(c.prompts[0].text, "Hello");
  EXPECT_EQ(s.max_tokens, 7);
  EXPECT_FLOAT_EQ(s.temperature, 0.5f);
  EXPECT_FLOAT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(s.min_p, 0.05f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.1f);
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.n, 2);
  EXPECT_EQ(s.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(s.stop_token_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_EQ(s.min_tokens, 2);
  EXPECT_EQ(s.logprobs, 3);
  EXPECT_TRUE(c.common.stream);
  EXPECT_TRUE(c.common.include_usage);
  EXPECT_EQ(c.common.priority, -1);
  EXPECT_EQ(c.common.cache_salt, "s");
}

TEST(CompletionRequestTest, PromptShapes) {
  EXPECT_EQ(Ok(ParseCompletionRequest(json::parse(R"({"prompt": [1, 2, 3]})"))).prompts[0].token_ids,
            (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(Ok(ParseCompletionRequest(json::parse(R"({"prompt": ["a", "b"]})"))).prompts.size(), 2u);
  EXPECT_EQ(Ok(ParseCompletionRequest(json::parse(R"({"prompt": [[1], [2, 3]]})"))).prompts[1].token_ids,
            (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(Ok(ParseCompletionRequest(json::parse(R"({"prompt": "x"})"))).common.sampling.max_tokens, 16);
  for (const char* bad : {R"({})", R"({"prompt": 5})", R"({"prompt": []})", R"({"prompt": [1, "a"]})",
                          R"({"prompt": [[1], 2]})", R"({"prompt": [-1]})", R"({"prompt": {"a": 1}})"}) {
    EXPECT_EQ(Err(ParseCompletionRequest(json::parse(bad))).param, "prompt") << bad;
  }
}

TEST(CompletionRequestTest, WrongTypesNameTheField) {
  struct Case {
    const char* body;
    const char* param;
  };
  for (const Case& c : {Case{R"({"prompt": "x", "temperature": "hot"})", "temperature"},
                        Case{R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens"},
                        Case{R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
                        Case{R"({"prompt": "x", "max_tokens": 1e12})", "max_tokens"},
                        Case{R"({"prompt": "x", "n": "2"})", "n"},
                        Case{R"({"prompt": "x", "stop": [1]})", "stop"},
                        Case{R"({"prompt": "x", "stream": "yes"})", "stream"},
                        Case{R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
                        Case{R"({"prompt": "x", "seed": "a"})", "seed"},
                        Case{R"({"prompt": "x", "logit_bias": {"1": 5}})", "logit_bias"},
                        Case{R"({"prompt": "x", "best_of": 3})", "best_of"},
                        Case{R"({"prompt": "x", "suffix": "y"})", "suffix"},
                        Case{R"({"prompt": "x", "response_format": {"type": "xml"}})", "response_format"}}) {
    const ApiError e = Err(ParseCompletionRequest(json::parse(c.body)));
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
    EXPECT_EQ(e.http_status, 400);
    EXPECT_NE(e.message.find(c.param), std::string::npos) << e.message;
  }
  EXPECT_EQ(Err(ParseCompletionRequest(json::parse("[1]"))).http_status, 400);
}

// The ranges of the field tables are checked while parsing, so a request out of range is a 400
// naming the field before any admission (and what the OpenAPI document says, openapi_test.cc).
TEST(CompletionRequestTest, RangesAreCheckedWhileParsing) {
  for (const char* field_and_value : {R"("temperature": 150)", R"("top_p": 0)", R"("top_p": 1.5)", R"("n": 0)",
                                      R"("logprobs": 21)", R"("presence_penalty": 3)", R"("min_p": -0.5)",
                                      R"("top_k": -2)", R"("repetition_penalty": 0)", R"("repetition_penalty": 1e300)",
                                      R"("stop_token_ids": [-1])", R"("stop": "")", R"("cache_salt": "")",
                                      R"("min_tokens": -1)"}) {
    const std::string body = std::string(R"({"prompt": "x", )") + field_and_value + "}";
    const ApiError e = Err(ParseCompletionRequest(json::parse(body)));
    const std::string field(field_and_value + 1, std::string_view(field_and_value + 1).find('"'));
    EXPECT_EQ(e.param, field) << body << " -> " << e.message;
  }
  const CompletionRequest c = Ok(ParseCompletionRequest(json::parse(
      R"({"prompt": "x", "temperature": 100, "top_p": 1, "top_k": -1, "repetition_penalty": 1e-30, "seed": 3.0})")));
  EXPECT_FLOAT_EQ(c.common.sampling.temperature, 100.0f);
  EXPECT_EQ(c.common.sampling.seed, 3u);  // a whole number is an integer however it is written
}

TEST(TokenizeRequestTest, FieldsAndErrors) {
  const TokenizeRequest t =
      Ok(ParseTokenizeRequest(json::parse(R"({"model": "m", "prompt": "hi", "add_special_tokens": false})")));
  EXPECT_EQ(t.prompt, "hi");
  EXPECT_FALSE(t.add_special_tokens);
  EXPECT_TRUE(Ok(ParseTokenizeRequest(json::parse(R"({"prompt": ""})"))).add_special_tokens);
  for (const char* bad : {R"({})", R"({"prompt": null})", R"({"prompt": 5})"}) {
    const auto parsed = ParseTokenizeRequest(json::parse(bad));
    ASSERT_TRUE(std::holds_alternative<ApiError>(parsed)) << bad;
    EXPECT_EQ(std::get<ApiError>(parsed).param, "prompt") << bad;
  }
  EXPECT_EQ(Ok(ParseDetokenizeRequest(json::parse(R"({"tokens": [1, 2]})"))).tokens, (std::vector<int32_t>{1, 2}));
  for (const char* bad : {R"({})", R"({"tokens": [-1]})", R"({"tokens": "1"})", R"({"tokens": [1.5]})"}) {
    const auto parsed = ParseDetokenizeRequest(json::parse(bad));
    ASSERT_TRUE(std::holds_alternative<ApiError>(parsed)) << bad;
    EXPECT_EQ(std::get<ApiError>(parsed).param, "tokens") << bad;
  }
}

TEST(ChatCompletionRequestTest, MessagesToolsAndLogprobs) {
  const json body = json::parse(R"({
    "model": "m",
    "messages": [{"role": "system", "content": "be brief"},
                 {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                 {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
                   "function": {"name": "f", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": "1", "content": "42"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "tool_choice": {"type": "function", "function": {"name": "f"}},
    "max_tokens": 5, "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 4})");
  const ChatCompletionRequest c = Ok(ParseChatCompletionRequest(body));
  // Text parts stay a list (the template decides how to read them); ContentText joins them.
  EXPECT_EQ(c.chat.messages[1]["content"].size(), 2u);
  EXPECT_EQ(ContentText(c.chat.messages[1]["content"]), "a\nb");
  EXPECT_EQ(c.chat.messages[2]["content"], "");  // an assistant's tool calls without content: "" for the template
  EXPECT_FALSE(c.echo);
  EXPECT_EQ(c.tool_choice, "named");
  EXPECT_EQ(c.forced_function, "f");
  EXPECT_EQ(c.common.sampling.max_tokens, 9);
  EXPECT_EQ(c.common.sampling.logprobs, 4);
  EXPECT_TRUE(c.chat.add_generation_prompt);
  // Key order of the messages survives (templates print them).
  EXPECT_EQ(c.chat.messages[3].begin().key(), "role");

  const ChatCompletionRequest plain = Ok(ParseChatCompletionRequest(json::parse(R"({"messages": [{"role": "user", "content": "hi"}]})")));
  EXPECT_EQ(plain.tool_choice, "none");
  EXPECT_FALSE(plain.common.max_tokens_given);
  EXPECT_FALSE(plain.common.sampling.logprobs.has_value());
}

TEST(TokenizeRequestTest, PromptOrMessagesAsVllmTakesThem) {
  const TokenizeRequest p = Ok(ParseTokenizeRequest(json::parse(R"({"prompt": "hi", "return_token_strs": true})")));
  EXPECT_FALSE(p.chat.has_value());
  EXPECT_EQ(p.prompt, "hi");
  EXPECT_TRUE(p.add_special_tokens);  // a prompt gets BOS by default
  EXPECT_TRUE(p.return_token_strs);

  const TokenizeRequest m = Ok(ParseTokenizeRequest(json::parse(R"({
    "model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]},
                               {"role": "assistant", "content": "b"}],
    "add_generation_prompt": false, "continue_final_message": true,
    "tools": [{"type": "function", "function": {"name": "f"}}], "chat_template_kwargs": {"enable_thinking": false}})")));
  ASSERT_TRUE(m.chat.has_value());
  EXPECT_FALSE(m.add_special_tokens);  // the template writes BOS itself
  EXPECT_FALSE(m.return_token_strs);
  EXPECT_TRUE(m.chat->continue_final_message);
  EXPECT_FALSE(m.chat->add_generation_prompt);
  EXPECT_EQ(m.chat->tools.size(), 1u);
  EXPECT_EQ(m.chat->chat_template_kwargs["enable_thinking"], false);
  EXPECT_TRUE(m.chat->messages[0]["content"].is_array());
  const TokenizeRequest defaults = Ok(ParseTokenizeRequest(json::parse(R"({"messages": [{"role": "user", "content": "x"}]})")));
  EXPECT_TRUE(defaults.chat->add_generation_prompt);

  for (const auto& [body, param] : std::vector<std::pair<const char*, const char*>>{
           {R"({})", "prompt"},
           {R"({"prompt": 1})", "prompt"},
           {R"({"prompt": "x", "messages": [{"role": "user", "content": "x"}]})", "prompt"},
           {R"({"messages": []})", "messages"},
           {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages"},
           {R"({"messages": [{"role": "user", "content": "x"}], "continue_final_message": true})",
            "continue_final_message"},
           {R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", "tools"},
           {R"({"prompt": "x", "return_token_strs": "yes"})", "return_token_strs"},
           // The assistant's missing content is "" for the template, but there is nothing to continue.
           {R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null,
                "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}],
               "add_generation_prompt": false, "continue_final_message": true})",
            "continue_final_message"},
           {R"({"add_generation_prompt": false})", "messages"}}) {
    EXPECT_EQ(Err(ParseTokenizeRequest(json::parse(body))).param, param) << body;
  }
}

TEST(ChatCompletionRequestTest, BadMessagesAndTools) {
  for (const char* bad : {R"({})", R"({"messages": []})", R"({"messages": "hi"})", R"({"messages": [1]})",
                          R"({"messages": [{"content": "x"}]})", R"({"messages": [{"role": "king", "content": "x"}]})",
                          R"({"messages": [{"role": "user"}]})",
                          R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})"}) {
    EXPECT_EQ(Err(ParseChatCompletionRequest(json::parse(bad))).param, "messages") << bad;
  }
  const std::string hi = R"("messages": [{"role": "user", "content": "hi"}])";
  EXPECT_EQ(Err(ParseChatCompletionRequest(json::parse("{" + hi + R"(, "tools": [{"type": "x"}]})"))).param, "tools");
  EXPECT_EQ(Err(ParseChatCompletionRequest(json::parse("{" + hi + R"(, "tool_choice": "required"})"))).param,
            "tool_choice");
  EXPECT_EQ(Err(ParseChatCompletionRequest(json::parse(
                    "{" + hi +
                    R"(, "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}})")))
                .param,
            "tool_choice");
  EXPECT_EQ(Err(ParseChatCompletionRequest(json::parse("{" + hi + R"(, "top_logprobs": 2})"))).param, "top_logprobs");
  EXPECT_EQ(Err(ParseChatCompletionRequest(json::parse("{" + hi + R"(, "continue_final_message": true})"))).param,
            "continue_final_message");
}

// Members a client may send with any type: the wrong one is a 400 naming the field, never an
// exception from a typed read (nlohmann's value(key, "") throws on a number).
TEST(ChatCompletionRequestTest, MembersOfTheWrongTypeAreRefusedNotThrown) {
  const std::string hi = R"("messages": [{"role": "user", "content": "hi"}])";
  struct Case {
    std::string body;
    const char* param;
  };
  for (const Case& c : {Case{"{" + hi + R"(, "response_format": {"type": 5}})", "response_format"},
                        Case{"{" + hi + R"(, "response_format": [1]})", "response_format"},
                        Case{R"({"messages": [{"role": "user", "content": [{"type": 1, "text": "a"}]}]})", "messages"},
                        Case{R"({"messages": [{"role": "user", "content": [{"type": "text", "text": 2}]}]})", "messages"},
                        Case{R"({"messages": [{"role": "user", "content": [7]}]})", "messages"},
                        Case{"{" + hi + R"(, "tools": [{"type": null, "function": {"name": "f"}}]})", "tools"},
                        Case{"{" + hi + R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": 5}}]})",
                             "tools"},
                        Case{"{" + hi + R"(, "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": 3}})",
                             "tool_choice"},
                        Case{"{" + hi + R"(, "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": []}}})",
                             "tool_choice"}}) {
    ApiError e;
    EXPECT_NO_THROW(e = Err(ParseChatCompletionRequest(json::parse(c.body)))) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
  }
}

// Request text quoted in an error message is made safe (server/protocol/safe_text.h).
TEST(ChatCompletionRequestTest, ErrorsQuoteRequestTextSafely) {
  const json role = {{"messages", json::array({{{"role", "k\x1B[2J" + std::string(500, 'x')}, {"content", "x"}}})}};
  const ApiError e = Err(ParseChatCompletionRequest(role));
  EXPECT_EQ(e.message.find('\x1B'), std::string::npos) << e.message;
  EXPECT_LT(e.message.size(), 200u);
}

TEST(ApiErrorTest, OpenAiShape) {
  const json j = BadRequest("bad", "temperature").ToJson();
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_EQ(FromStatus(ResourceExhausted("full")).http_status, 429);
  EXPECT_EQ(FromStatus(OutOfRange("long")).http_status, 400);
  EXPECT_EQ(FromStatus(Internal("bug")).http_status, 500);
}

// kv_transfer_params (disaggregation): a producer's answer round-trips; anything malformed a
// hostile or broken client could send is a 400 naming the field, never a request that pulls.
TEST(CompletionRequestTest, KvTransferParams) {
  RemoteKv where;
  where.engine_id = "p";
  where.host = "10.0.0.1";
  where.port = 14579;
  where.transfer_id = 0xfedcba9876543210ULL;
  where.num_tokens = 21;
  where.tokens_hash = 0x0123456789abcdefULL;
  where.num_bytes = 4096;
  json body = {{"prompt", "x"}, {"kv_transfer_params", KvTransferParamsJson(where)}};
  const CompletionRequest c = Ok(ParseCompletionRequest(body));
  ASSERT_TRUE(c.common.kv_transfer.remote_prefill.has_value());
  const RemoteKv& got = *c.common.kv_transfer.remote_prefill;
  EXPECT_EQ(got.host, where.host);
  EXPECT_EQ(got.port, where.port);
  EXPECT_EQ(got.transfer_id, where.transfer_id);
  EXPECT_EQ(got.tokens_hash, where.tokens_hash);
  EXPECT_EQ(got.num_tokens, where.num_tokens);
  EXPECT_FALSE(c.common.kv_transfer.do_remote_decode);

  EXPECT_TRUE(Ok(ParseCompletionRequest(json{{"prompt", "x"}, {"kv_transfer_params", {{"do_remote_decode", true}}}}))
                  .common.kv_transfer.do_remote_decode);
  const json bad[] = {
      json::array({1}),
      {{"do_remote_decode", "yes"}},
      {{"do_remote_decode", true}, {"do_remote_prefill", true}},
      {{"do_remote_prefill", true}},
  };
  for (const json& params : bad) {
    EXPECT_EQ(Err(ParseCompletionRequest(json{{"prompt", "x"}, {"kv_transfer_params", params}})).param,
              "kv_transfer_params")
        << params.dump();
  }
  // Each field of a producer's answer broken in turn.
  const std::pair<const char*, json> broken[] = {
      {"remote_port", 70000},        {"remote_port", "14579"},       {"remote_transfer_id", "xyz"},
      {"remote_transfer_id", 5},     {"remote_tokens_hash", ""},     {"remote_num_tokens", 0},
      {"remote_num_tokens", -3},     {"remote_host", ""},            {"remote_transfer_id", "1ffffffffffffffff"},
  };
  for (const auto& [field, value] : broken) {
    json params = KvTransferParamsJson(where);
    params[field] = value;
    EXPECT_EQ(Err(ParseCompletionRequest(json{{"prompt", "x"}, {"kv_transfer_params", params}})).param,
              "kv_transfer_params")
        << field << " = " << value.dump();
  }
}

}  // namespace
}  // namespace ember::server
