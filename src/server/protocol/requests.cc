#include "server/protocol/requests.h"

#include <fmt/format.h>

#include "server/protocol/field_reader.h"
#include "server/protocol/safe_text.h"
#include "server/protocol/structured_outputs.h"

namespace ember::server {
namespace {

// obj[key] when it is a string, else "". (nlohmann's value(key, "") throws when the member is
// there with another type, which a client controls.)
std::string StringMember(const nlohmann::ordered_json& obj, const char* key) {
  if (!obj.is_object()) return "";
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

bool IsObjectWithStringMember(const nlohmann::ordered_json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_string();
}

// Fields of the OpenAI API that ember does not implement yet: rejected, not ignored, so a client
// never believes it got behaviour it did not.
void RejectUnsupported(const nlohmann::ordered_json& body, FieldReader& r) {
  if (r.Has("logit_bias") && !body["logit_bias"].empty()) {
    r.Fail(BadRequest("'logit_bias' is not supported yet", "logit_bias"));
  }
  if (r.Has("suffix")) r.Fail(BadRequest("'suffix' is not supported", "suffix"));
  if (r.Has("best_of")) {
    const nlohmann::ordered_json& v = body["best_of"];
    const nlohmann::ordered_json n = body.value("n", nlohmann::ordered_json(1));
    if (v != n) r.Fail(BadRequest("'best_of' other than n is not supported", "best_of"));
  }
}

void ParseCommon(const nlohmann::ordered_json& body, FieldReader& r, CommonRequest* c) {
  r.String("model", &c->model);
  SamplingParams& s = c->sampling;
  r.Int("n", &s.n);
  r.Float("temperature", &s.temperature);
  r.Float("top_p", &s.top_p);
  r.Int("top_k", &s.top_k);
  r.Float("min_p", &s.min_p);
  r.Float("presence_penalty", &s.presence_penalty);
  r.Float("frequency_penalty", &s.frequency_penalty);
  r.Float("repetition_penalty", &s.repetition_penalty);
  r.Uint64("seed", &s.seed);
  r.Int("min_tokens", &s.min_tokens);
  r.Bool("ignore_eos", &s.ignore_eos);
  r.IntArray("stop_token_ids", &s.stop_token_ids);
  r.StringOrStrings("stop", &s.stop);
  r.Bool("include_stop_str_in_output", &s.include_stop_str_in_output);
  r.Bool("stream", &c->stream);
  if (r.Has("stream_options")) {
    const nlohmann::ordered_json& options = body["stream_options"];
    if (!options.is_object()) {
      r.Fail(BadRequest("'stream_options' must be an object", "stream_options"));
    } else {
      FieldReader o(options);
      o.Bool("include_usage", &c->include_usage);
      if (o.error()) r.Fail(*o.error());
      if (!c->stream) r.Fail(BadRequest("'stream_options' is only allowed when 'stream' is true", "stream_options"));
    }
  }
  r.Int("priority", &c->priority);
  r.String("cache_salt", &c->cache_salt);
  if (r.Has("cache_salt") && c->cache_salt.empty()) r.Fail(BadRequest("'cache_salt' must not be empty", "cache_salt"));
  r.String("user", &c->user);
  RejectUnsupported(body, r);
  ParseStructuredOutputs(body, r, c);
}

void ReadMaxTokens(FieldReader& r, std::string_view key, CommonRequest* c) {
  std::optional<int32_t> value;
  r.Int(key, &value);
  if (!value) return;
  if (*value < 1) r.Fail(BadRequest(fmt::format("'{}' must be at least 1, got {}", key, *value), std::string(key)));
  c->sampling.max_tokens = *value;
  c->max_tokens_given = true;
}

bool IsTokenArray(const nlohmann::ordered_json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const nlohmann::ordered_json& t : v) {
    if (!t.is_number_integer()) return false;
  }
  return true;
}

void ParsePrompt(const nlohmann::ordered_json& body, FieldReader& r, std::vector<Prompt>* prompts) {
  if (!r.Has("prompt")) return r.Fail(BadRequest("'prompt' is required", "prompt"));
  const nlohmann::ordered_json& p = body["prompt"];
  const std::string kShape = "'prompt' must be a string, an array of strings, an array of token ids, or an array "
                             "of arrays of token ids";
  auto add_tokens = [&](const nlohmann::ordered_json& ids) {
    Prompt prompt;
    for (const nlohmann::ordered_json& t : ids) {
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id > INT32_MAX) return r.Fail(BadRequest(fmt::format("token id {} is out of range", id), "prompt"));
      prompt.token_ids.push_back(static_cast<int32_t>(id));
    }
    prompts->push_back(std::move(prompt));
  };
  if (p.is_string()) {
    prompts->push_back({p.get<std::string>(), {}});
  } else if (IsTokenArray(p)) {
    add_tokens(p);
  } else if (p.is_array() && !p.empty()) {
    for (const nlohmann::ordered_json& item : p) {
      if (item.is_string()) {
        prompts->push_back({item.get<std::string>(), {}});
      } else if (IsTokenArray(item)) {
        add_tokens(item);
      } else {
        return r.Fail(BadRequest(kShape, "prompt"));
      }
    }
  } else {
    return r.Fail(BadRequest(kShape, "prompt"));
  }
}

// Checks roles and content; content parts must be text ({"type": "text", "text": ...}) until
// ember has multimodal inputs, and stay a list (the template decides how to read them).
std::optional<ApiError> NormalizeMessages(nlohmann::ordered_json& messages) {
  if (!messages.is_array() || messages.empty()) return BadRequest("'messages' must be a non-empty array", "messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    nlohmann::ordered_json& m = messages[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) return BadRequest(where + " must be an object", "messages");
    if (!m.contains("role") || !m["role"].is_string()) return BadRequest(where + ".role must be a string", "messages");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer") {
      return BadRequest(fmt::format("{}.role '{}' is not one of system, developer, user, assistant, tool", where,
                                    SafeText(role)),
                        "messages");
    }
    if (!m.contains("content") || m["content"].is_null()) {
      if (role == "assistant" && m.contains("tool_calls")) continue;
      if (role == "assistant") {
        m["content"] = "";
        continue;
      }
      return BadRequest(where + ".content is required", "messages");
    }
    nlohmann::ordered_json& content = m["content"];
    if (content.is_string()) continue;
    if (!content.is_array()) return BadRequest(where + ".content must be a string or an array of parts", "messages");
    for (const nlohmann::ordered_json& part : content) {
      if (StringMember(part, "type") != "text" || !IsObjectWithStringMember(part, "text")) {
        return BadRequest(where + ".content: only text parts ({\"type\": \"text\", \"text\": ...}) are supported; "
                                  "image, audio and video inputs are not available yet",
                          "messages");
      }
    }
  }
  return std::nullopt;
}

void ParseToolList(const nlohmann::ordered_json& body, FieldReader& r, ChatPrompt* c) {
  if (r.Has("tools")) {
    const nlohmann::ordered_json& tools = body["tools"];
    if (!tools.is_array()) return r.Fail(BadRequest("'tools' must be an array", "tools"));
    for (const nlohmann::ordered_json& t : tools) {
      if (StringMember(t, "type") != "function" || !t.contains("function") ||
          !IsObjectWithStringMember(t["function"], "name")) {
        return r.Fail(BadRequest("each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}", "tools"));
      }
      const nlohmann::ordered_json& function = t["function"];
      if (function.contains("parameters") && !function["parameters"].is_null() && !function["parameters"].is_object()) {
        return r.Fail(BadRequest("a tool's function.parameters must be a JSON Schema object", "tools"));
      }
    }
    if (!tools.empty()) c->tools = tools;
  }
}

void ParseToolChoice(const nlohmann::ordered_json& body, FieldReader& r, ChatCompletionRequest* c) {
  const nlohmann::ordered_json& tools = c->chat.tools;
  c->tool_choice = tools.is_null() ? "none" : "auto";
  if (!r.Has("tool_choice")) return;
  const nlohmann::ordered_json& choice = body["tool_choice"];
  if (choice.is_string()) {
    const std::string s = choice.get<std::string>();
    if (s != "auto" && s != "none" && s != "required") {
      return r.Fail(BadRequest("'tool_choice' must be \"auto\", \"none\", \"required\" or a named function", "tool_choice"));
    }
    c->tool_choice = s;
  } else if (StringMember(choice, "type") == "function" && choice.contains("function") &&
             IsObjectWithStringMember(choice["function"], "name")) {
    c->tool_choice = "named";
    c->forced_function = choice["function"]["name"].get<std::string>();
  } else {
    return r.Fail(BadRequest("'tool_choice' must be \"auto\", \"none\", \"required\" or a named function", "tool_choice"));
  }
  if (c->tool_choice != "none" && tools.is_null()) {
    return r.Fail(BadRequest("'tool_choice' needs 'tools'", "tool_choice"));
  }
  if (c->tool_choice == "named") {
    bool found = false;
    for (const auto& t : tools) found = found || t["function"]["name"] == c->forced_function;
    if (!found) {
      r.Fail(BadRequest(fmt::format("tool_choice names '{}', which is not in 'tools'", SafeText(c->forced_function)),
                        "tool_choice"));
    }
  }
}

// The conversation fields: messages (required), tools, add_generation_prompt,
// continue_final_message, chat_template_kwargs.
void ParseChatPrompt(const nlohmann::ordered_json& body, FieldReader& r, ChatPrompt* c) {
  if (!r.Has("messages")) return r.Fail(BadRequest("'messages' is required", "messages"));
  c->messages = body["messages"];
  if (auto error = NormalizeMessages(c->messages)) return r.Fail(*error);
  ParseToolList(body, r, c);
  r.Bool("add_generation_prompt", &c->add_generation_prompt);
  r.Bool("continue_final_message", &c->continue_final_message);
  if (c->add_generation_prompt && c->continue_final_message) {
    r.Fail(BadRequest("'continue_final_message' and 'add_generation_prompt' cannot both be true",
                      "continue_final_message"));
  }
  if (r.Has("chat_template_kwargs")) {
    if (!body["chat_template_kwargs"].is_object()) {
      r.Fail(BadRequest("'chat_template_kwargs' must be an object", "chat_template_kwargs"));
    } else {
      c->chat_template_kwargs = body["chat_template_kwargs"];
    }
  }
}

}  // namespace

std::string ContentText(const nlohmann::ordered_json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (!content.is_array()) return text;
  bool first = true;
  for (const nlohmann::ordered_json& part : content) {
    if (!IsObjectWithStringMember(part, "text")) continue;
    if (!first) text += "\n";
    text += part["text"].get<std::string>();
    first = false;
  }
  return text;
}

std::variant<CompletionRequest, ApiError> ParseCompletionRequest(const nlohmann::ordered_json& body,
                                                                 const SamplingParams& defaults) {
  if (!body.is_object()) return BadRequest("the request body must be a JSON object");
  CompletionRequest c;
  c.common.sampling = defaults;
  FieldReader r(body);
  ParseCommon(body, r, &c.common);
  ReadMaxTokens(r, "max_tokens", &c.common);
  if (!c.common.max_tokens_given) c.common.sampling.max_tokens = 16;  // OpenAI's default for completions
  ParsePrompt(body, r, &c.prompts);
  r.Bool("echo", &c.echo);
  std::optional<int32_t> logprobs;
  r.Int("logprobs", &logprobs);
  if (logprobs) c.common.sampling.logprobs = *logprobs;
  if (r.error()) return *r.error();
  return c;
}

std::variant<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(const nlohmann::ordered_json& body,
                                                                         const SamplingParams& defaults) {
  if (!body.is_object()) return BadRequest("the request body must be a JSON object");
  ChatCompletionRequest c;
  c.common.sampling = defaults;
  FieldReader r(body);
  ParseCommon(body, r, &c.common);
  ReadMaxTokens(r, "max_tokens", &c.common);
  ReadMaxTokens(r, "max_completion_tokens", &c.common);  // the newer name wins
  if (!r.Has("messages")) return BadRequest("'messages' is required", "messages");
  ParseChatPrompt(body, r, &c.chat);
  ParseToolChoice(body, r, &c);
  r.Bool("echo", &c.echo);
  bool want_logprobs = false;
  r.Bool("logprobs", &want_logprobs);
  std::optional<int32_t> top_logprobs;
  r.Int("top_logprobs", &top_logprobs);
  if (top_logprobs && !want_logprobs) r.Fail(BadRequest("'top_logprobs' needs 'logprobs': true", "top_logprobs"));
  if (want_logprobs) c.common.sampling.logprobs = top_logprobs.value_or(0);
  if (r.error()) return *r.error();
  return c;
}

std::variant<TokenizeRequest, ApiError> ParseTokenizeRequest(const nlohmann::ordered_json& body) {
  if (!body.is_object()) return BadRequest("the request body must be a JSON object");
  TokenizeRequest t;
  FieldReader r(body);
  r.String("model", &t.model);
  r.Bool("return_token_strs", &t.return_token_strs);
  if (r.Has("messages")) {
    if (r.Has("prompt")) r.Fail(BadRequest("give either 'prompt' or 'messages', not both", "prompt"));
    t.add_special_tokens = false;
    ParseChatPrompt(body, r, &t.chat.emplace());
  } else if (r.Has("prompt")) {
    r.String("prompt", &t.prompt);
  } else {
    r.Fail(BadRequest("'prompt' (a string) or 'messages' (a chat) is required", "prompt"));
  }
  r.Bool("add_special_tokens", &t.add_special_tokens);
  if (r.error()) return *r.error();
  return t;
}

}  // namespace ember::server
