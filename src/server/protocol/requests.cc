#include "server/protocol/requests.h"

#include "server/protocol/kv_transfer_params.h"

#include <fmt/format.h>

#include <limits>

#include "server/protocol/field_reader.h"
#include "server/protocol/request_fields.h"
#include "server/protocol/safe_text.h"
#include "server/protocol/structured_outputs.h"

namespace ember::server {
namespace {

using json = nlohmann::ordered_json;

// obj[key] when it is a string, else "". (nlohmann's value(key, "") throws when the member is
// there with another type, which a client controls.)
std::string StringMember(const json& obj, const char* key) {
  if (!obj.is_object()) return "";
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

bool IsObjectWithStringMember(const json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_string();
}

// OpenAI's sampling fields and vLLM's extras; the ranges are SamplingParams::Validate's.
const std::vector<Field<SamplingParams>>& SamplingFields() {
  static const std::vector<Field<SamplingParams>> fields = {
      {"n", &SamplingParams::n, "choices per prompt; at most --max-n", {.min = 1, .max = SamplingParams::kMaxN}},
      {"temperature", &SamplingParams::temperature, "0 is greedy",
       {.min = 0, .max = SamplingParams::kMaxTemperature}},
      {"top_p", &SamplingParams::top_p, "nucleus sampling: the smallest set of tokens with this much probability",
       {.min = 0, .max = 1, .exclusive_min = true}},
      {"top_k", &SamplingParams::top_k, "the k most likely tokens only; 0 or -1 is off", {.min = -1}},
      {"min_p", &SamplingParams::min_p, "tokens at least this fraction of the most likely one's probability",
       {.min = 0, .max = 1}},
      {"presence_penalty", &SamplingParams::presence_penalty, "OpenAI's presence penalty", {.min = -2, .max = 2}},
      {"frequency_penalty", &SamplingParams::frequency_penalty, "OpenAI's frequency penalty", {.min = -2, .max = 2}},
      {"repetition_penalty", &SamplingParams::repetition_penalty,
       "vLLM's repetition penalty over prompt and output tokens; 1 is off", {.min = 0, .exclusive_min = true}},
      {"seed", &SamplingParams::seed, "the same seed gives the same tokens"},
      {"min_tokens", &SamplingParams::min_tokens, "EOS and stop tokens are masked until this many; at most max_tokens",
       {.min = 0}},
      {"ignore_eos", &SamplingParams::ignore_eos, "keep generating past EOS"},
      {"stop_token_ids", &SamplingParams::stop_token_ids, "token ids that stop generation (in the vocabulary)",
       {.min = 0}},
      {"stop", &SamplingParams::stop, "stop strings (at most 1024 bytes each), not part of the output",
       {.min_length = 1, .max_items = SamplingParams::kMaxStopStrings}},
      {"include_stop_str_in_output", &SamplingParams::include_stop_str_in_output,
       "keep the matched stop string in the output"},
  };
  return fields;
}

const std::vector<Field<CommonRequest>>& StreamOptionsFields() {
  static const std::vector<Field<CommonRequest>> fields = {
      {"include_usage", &CommonRequest::include_usage, "a last chunk with the usage and no choices"},
  };
  return fields;
}

json ObjectSchema(const std::vector<Field<CommonRequest>>& fields) {
  json schema;
  AddFieldsSchema(fields, CommonRequest{}, &schema);
  return schema;
}

// The fields every generation request has; the order is the parse order (stream before
// stream_options, n before best_of: SamplingFields are read first).
const std::vector<Field<CommonRequest>>& CommonFields() {
  static const std::vector<Field<CommonRequest>> fields = [] {
    std::vector<Field<CommonRequest>> f = {
        {"model", &CommonRequest::model, "the served model's name (another is a 404); empty or absent: that one"},
        {"max_tokens", &CommonRequest::max_tokens,
         "tokens to generate at most; prompt + max_tokens must fit the context. Absent: 16 for completions, "
         "--default-max-tokens for chat, cut to the context left",
         {.min = 1}},
        {"stream", &CommonRequest::stream, "answer as server-sent events (text/event-stream)"},
        {"stream_options", CustomField<CommonRequest>{
                               [](const json& v, FieldReader& r, CommonRequest* c) {
                                 if (!v.is_object()) {
                                   return r.Fail(BadRequest("'stream_options' must be an object", "stream_options"));
                                 }
                                 FieldReader o(v);
                                 ReadFields(v, o, StreamOptionsFields(), c);
                                 if (o.error()) r.Fail(*o.error());
                               },
                               [] { return ObjectSchema(StreamOptionsFields()); }},
         "only with stream: true", {}, false, {{"stream", true}}},
        {"priority", &CommonRequest::priority, "lower runs first"},
        {"cache_salt", &CommonRequest::cache_salt, "prefix-cache isolation: only requests with the same salt share",
         {.min_length = 1}},
        {"user", &CommonRequest::user, "an end-user id (unused)"},
        {"kv_transfer_params", CustomField<CommonRequest>{
                                   [](const json& v, FieldReader& r, CommonRequest* c) {
                                     if (auto error = ParseKvTransferParams(v, &c->kv_transfer)) r.Fail(*error);
                                   },
                                   [] { return json{{"type", "object"}}; }},
         "prefill/decode disaggregation (vLLM's): {\"do_remote_decode\": true} asks a KV producer to hold the "
         "prompt's KV; a producer's answer (do_remote_prefill) makes a KV consumer pull it"},
        // Fields of the OpenAI API that ember does not implement yet: refused, not ignored, so a
        // client never believes it got behaviour it did not.
        {"logit_bias", CustomField<CommonRequest>{
                           [](const json& v, FieldReader& r, CommonRequest*) {
                             if (!v.empty()) r.Fail(BadRequest("'logit_bias' is not supported yet", "logit_bias"));
                           },
                           [] {
                             return json{{"anyOf", json::array({{{"type", "object"}, {"maxProperties", 0}},
                                                                {{"type", "array"}, {"maxItems", 0}}})}};
                           }},
         "not supported yet: only an empty one is accepted"},
        {"suffix", CustomField<CommonRequest>{
                       [](const json&, FieldReader& r, CommonRequest*) {
                         r.Fail(BadRequest("'suffix' is not supported", "suffix"));
                       },
                       [] { return json{{"type", "null"}}; }},
         "not supported"},
        {"best_of", CustomField<CommonRequest>{
                        [](const json&, FieldReader& r, CommonRequest* c) {
                          std::optional<int32_t> best_of;
                          r.Int("best_of", &best_of);
                          if (best_of && *best_of != c->sampling.n) {
                            r.Fail(BadRequest("'best_of' other than n is not supported", "best_of"));
                          }
                        },
                        [] { return json{{"type", "integer"}}; }},
         "only equal to n is supported"},
    };
    for (const Field<CommonRequest>& s : StructuredOutputFields()) f.push_back(s);
    return f;
  }();
  return fields;
}

void ReadCommon(const json& body, FieldReader& r, CommonRequest* c) {
  ReadFields(body, r, SamplingFields(), &c->sampling);
  ReadFields(body, r, CommonFields(), c);
  if (c->max_tokens) {
    c->sampling.max_tokens = *c->max_tokens;
    c->max_tokens_given = true;
  }
}

void AddCommonSchema(const SamplingParams& defaults, json* schema) {
  AddFieldsSchema(SamplingFields(), defaults, schema);
  AddFieldsSchema(CommonFields(), CommonRequest{}, schema);
}

bool IsTokenArray(const json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const json& t : v) {
    if (!t.is_number_integer()) return false;
  }
  return true;
}

void ReadPrompt(const json& p, FieldReader& r, CompletionRequest* c) {
  std::vector<Prompt>* prompts = &c->prompts;
  const std::string kShape = "'prompt' must be a string, an array of strings, an array of token ids, or an array "
                             "of arrays of token ids";
  auto add_tokens = [&](const json& ids) {
    Prompt prompt;
    for (const json& t : ids) {
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
    for (const json& item : p) {
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

// The shape of one content part: text, or an OpenAI / vLLM media part whose URL or data is a
// string (what it holds is checked when the media is fetched and decoded, server/multimodal).
std::optional<ApiError> CheckContentPart(const json& part, const std::string& where) {
  const std::string type = StringMember(part, "type");
  auto needs = [&](const char* member, const char* inner, const char* shape) -> std::optional<ApiError> {
    const bool ok = part.is_object() && part.contains(member) &&
                    (part[member].is_object() ? IsObjectWithStringMember(part[member], inner)
                                              : part[member].is_string() && std::string_view(inner) == "url");
    if (ok) return std::nullopt;
    return BadRequest(fmt::format("{}: a {} part must be {}", where, type, shape), "messages");
  };
  if (type == "text") {
    if (IsObjectWithStringMember(part, "text")) return std::nullopt;
    return BadRequest(where + ": a text part must be {\"type\": \"text\", \"text\": ...}", "messages");
  }
  if (type == "image_url") return needs("image_url", "url", "{\"type\": \"image_url\", \"image_url\": {\"url\": ...}}");
  if (type == "video_url") return needs("video_url", "url", "{\"type\": \"video_url\", \"video_url\": {\"url\": ...}}");
  if (type == "audio_url") return needs("audio_url", "url", "{\"type\": \"audio_url\", \"audio_url\": {\"url\": ...}}");
  if (type == "input_audio") {
    if (auto e = needs("input_audio", "data", "{\"type\": \"input_audio\", \"input_audio\": {\"data\": BASE64, \"format\": ...}}")) {
      return e;
    }
    const json& audio = part["input_audio"];
    if (audio.contains("format") && !audio["format"].is_string()) {
      return BadRequest(where + ": input_audio.format must be a string such as \"wav\" or \"mp3\"", "messages");
    }
    return std::nullopt;
  }
  return BadRequest(fmt::format("{}: content part type '{}' is not one of text, image_url, input_audio, video_url, "
                                "audio_url",
                                where, SafeText(type)),
                    "messages");
}

// Checks roles and content; content parts are text or media (image_url, input_audio, video_url,
// audio_url), and stay a list (the template decides how to read them; whether the model takes
// media is the chat route's check).
std::optional<ApiError> NormalizeMessages(json& messages) {
  if (!messages.is_array() || messages.empty()) return BadRequest("'messages' must be a non-empty array", "messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    json& m = messages[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) return BadRequest(where + " must be an object", "messages");
    if (!m.contains("role") || !m["role"].is_string()) return BadRequest(where + ".role must be a string", "messages");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer") {
      return BadRequest(fmt::format("{}.role '{}' is not one of system, developer, user, assistant, tool", where,
                                    SafeText(role)),
                        "messages");
    }
    // Null members are absent, as everywhere in a request ("tool_calls": null is no calls), and an
    // assistant's missing content is "": templates concatenate it or test it for truth, and a
    // template without tool support must still render the calls' turn (found by schemathesis).
    for (auto it = m.begin(); it != m.end();) it = it->is_null() && it.key() != "content" ? m.erase(it) : std::next(it);
    if (!m.contains("content") || m["content"].is_null()) {
      if (role != "assistant") return BadRequest(where + ".content is required", "messages");
      m["content"] = "";
      continue;
    }
    json& content = m["content"];
    if (content.is_string()) continue;
    if (!content.is_array()) return BadRequest(where + ".content must be a string or an array of parts", "messages");
    for (size_t j = 0; j < content.size(); ++j) {
      if (auto e = CheckContentPart(content[j], fmt::format("{}.content[{}]", where, j))) return e;
    }
  }
  return std::nullopt;
}

void ReadTools(const json& tools, FieldReader& r, ChatPrompt* c) {
  if (!tools.is_array()) return r.Fail(BadRequest("'tools' must be an array", "tools"));
  for (const json& t : tools) {
    if (StringMember(t, "type") != "function" || !t.contains("function") ||
        !IsObjectWithStringMember(t["function"], "name")) {
      return r.Fail(BadRequest("each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}", "tools"));
    }
    const json& function = t["function"];
    if (function.contains("parameters") && !function["parameters"].is_null() && !function["parameters"].is_object()) {
      return r.Fail(BadRequest("a tool's function.parameters must be a JSON Schema object", "tools"));
    }
  }
  if (!tools.empty()) c->tools = tools;
}

// After the conversation's fields (ChatPromptFields, read first): without tool_choice, "auto" when
// there are tools.
void ReadToolChoice(const json& choice, FieldReader& r, ChatCompletionRequest* c) {
  const json& tools = c->chat.tools;
  const char* kShape = "'tool_choice' must be \"auto\", \"none\", \"required\" or a named function";
  if (choice.is_string()) {
    const std::string s = choice.get<std::string>();
    if (s != "auto" && s != "none" && s != "required") return r.Fail(BadRequest(kShape, "tool_choice"));
    c->tool_choice = s;
  } else if (StringMember(choice, "type") == "function" && choice.contains("function") &&
             IsObjectWithStringMember(choice["function"], "name")) {
    c->tool_choice = "named";
    c->forced_function = choice["function"]["name"].get<std::string>();
  } else {
    return r.Fail(BadRequest(kShape, "tool_choice"));
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

json TokenIdsSchema() {
  return {{"type", "array"}, {"minItems", 1},
          {"items", {{"type", "integer"}, {"minimum", 0}, {"maximum", std::numeric_limits<int32_t>::max()}}}};
}

json PromptSchema() {
  // An empty string is refused once tokenized unless the model adds a BOS; documented as refused.
  const json text = {{"type", "string"}, {"minLength", 1}};
  return {{"anyOf", json::array({text, TokenIdsSchema(),
                                 {{"type", "array"}, {"minItems", 1},
                                  {"items", {{"anyOf", json::array({text, TokenIdsSchema()})}}}}})}};
}

const std::vector<Field<CompletionRequest>>& CompletionFields() {
  static const std::vector<Field<CompletionRequest>> fields = {
      {"prompt", CustomField<CompletionRequest>{ReadPrompt, PromptSchema},
       "a string, strings, token ids, or arrays of token ids (in the vocabulary); at most "
       "--max-prompts-per-request prompts",
       {}, /*required=*/true},
      {"echo", &CompletionRequest::echo, "the prompt's text before the completion"},
      {"logprobs", &CompletionRequest::logprobs, "log probabilities of the chosen token and this many top tokens",
       {.min = 0, .max = SamplingParams::kMaxLogprobs}},
  };
  return fields;
}

json ContentPartsSchema() {
  auto part = [](const char* type, const char* member, json inner) {
    return json{{"type", "object"},
                {"properties", {{"type", {{"const", type}}}, {member, std::move(inner)}}},
                {"required", {"type", member}}};
  };
  auto url = [] {
    return json{{"anyOf", json::array({{{"type", "string"}},
                                       {{"type", "object"},
                                        {"properties", {{"url", {{"type", "string"}}}}},
                                        {"required", {"url"}}}})}};
  };
  const json audio = {{"type", "object"},
                      {"properties", {{"data", {{"type", "string"}}}, {"format", {{"type", "string"}}}}},
                      {"required", {"data"}}};
  return {{"type", "array"},
          {"items", {{"anyOf", json::array({part("text", "text", {{"type", "string"}}), part("image_url", "image_url", url()),
                                            part("input_audio", "input_audio", audio),
                                            part("video_url", "video_url", url()),
                                            part("audio_url", "audio_url", url())})}}}};
}

json MessagesSchema() {
  const json content = {{"anyOf", json::array({{{"type", "string"}}, ContentPartsSchema()})}};
  const json tool_calls = {
      {"type", "array"},
      {"items",
       {{"type", "object"},
        {"properties",
         {{"id", {{"type", "string"}}},
          {"type", {{"const", "function"}}},
          {"function",
           {{"type", "object"},
            {"properties", {{"name", {{"type", "string"}}}, {"arguments", {{"type", "string"}}}}},
            {"required", {"name", "arguments"}}}}}},
        {"required", {"type", "function"}}}}};
  // Content is required but for an assistant's, which may be null or absent (tool calls only).
  const json others = {{"type", "object"},
                       {"properties",
                        {{"role", {{"enum", {"system", "developer", "user", "tool"}}}},
                         {"content", content},
                         {"name", {{"type", "string"}}},
                         {"tool_call_id", {{"type", "string"}}}}},
                       {"required", {"role", "content"}}};
  const json assistant = {{"type", "object"},
                          {"properties",
                           {{"role", {{"const", "assistant"}}},
                            {"content", {{"anyOf", json::array({content, {{"type", "null"}}})}}},
                            {"name", {{"type", "string"}}},
                            {"tool_calls", tool_calls}}},
                          {"required", {"role"}}};
  return {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", json::array({others, assistant})}}}};
}

json ToolsSchema() {
  return {{"type", "array"},
          {"items",
           {{"type", "object"},
            {"properties",
             {{"type", {{"const", "function"}}},
              {"function",
               {{"type", "object"},
                {"properties",
                 {{"name", {{"type", "string"}}},
                  {"description", {{"type", "string"}}},
                  {"parameters", {{"type", {"object", "null"}}}}}},
                {"required", {"name"}}}}}},
            {"required", {"type", "function"}}}}};
}

json ToolChoiceSchema() {
  return {{"anyOf",
           json::array({{{"enum", {"auto", "none", "required"}}},
                        {{"type", "object"},
                         {"properties",
                          {{"type", {{"const", "function"}}},
                           {"function",
                            {{"type", "object"},
                             {"properties", {{"name", {{"type", "string"}}}}},
                             {"required", {"name"}}}}}},
                         {"required", {"type", "function"}}}})}};
}

// The conversation, shared by /v1/chat/completions and /tokenize with messages (ChatPrompt).
const std::vector<Field<ChatPrompt>>& ChatPromptFields() {
  static const std::vector<Field<ChatPrompt>> fields = {
      {"messages", CustomField<ChatPrompt>{
                       [](const json& v, FieldReader& r, ChatPrompt* c) {
                         c->messages = v;
                         if (auto error = NormalizeMessages(c->messages)) r.Fail(*error);
                       },
                       MessagesSchema},
       "the conversation; content is a string or a list of parts: text, image_url, input_audio, video_url and "
       "audio_url (media for models that take it: data: URLs, or file:// under --allowed-local-media-path). "
       "Templates that loop over parts get the list (media parts as {\"type\": \"image\"|\"video\"|\"audio\"}), "
       "the others the texts joined by \"\\n\" with each media part's placeholder in place; null members are "
       "absent and an assistant's missing content is \"\"",
       {}, /*required=*/true},
      {"tools", CustomField<ChatPrompt>{ReadTools, ToolsSchema}, "functions the model may call"},
      {"add_generation_prompt", &ChatPrompt::add_generation_prompt, "end the prompt with the assistant's turn"},
      {"continue_final_message", &ChatPrompt::continue_final_message,
       "continue the last message instead, as transformers does (add_generation_prompt must then be false, and "
       "that message must have content)",
       {}, false, {{"add_generation_prompt", false}}},
      {"chat_template_kwargs", CustomField<ChatPrompt>{
                                   [](const json& v, FieldReader& r, ChatPrompt* c) {
                                     if (!v.is_object()) {
                                       return r.Fail(BadRequest("'chat_template_kwargs' must be an object",
                                                                "chat_template_kwargs"));
                                     }
                                     c->chat_template_kwargs = v;
                                   },
                                   [] { return json{{"type", "object"}}; }},
       "extra variables for the chat template"},
  };
  return fields;
}

// The conversation's fields, and the check across them that no schema states: a final message
// sent without content (an assistant's tool calls, "" for the template) has nothing to continue,
// as transformers refuses it.
void ReadChatPrompt(const json& body, FieldReader& r, ChatPrompt* c) {
  ReadFields(body, r, ChatPromptFields(), c);
  if (r.error() || !c->continue_final_message) return;
  const json& sent = body.at("messages").back();
  if (!sent.contains("content") || sent["content"].is_null()) {
    r.Fail(BadRequest("continue_final_message is set but the final message has no content to continue",
                      "continue_final_message"));
  }
}

// The chat request's own fields, read after ChatPromptFields (tool_choice checks tools).
const std::vector<Field<ChatCompletionRequest>>& ChatFields() {
  static const std::vector<Field<ChatCompletionRequest>> fields = {
      {"max_completion_tokens", &ChatCompletionRequest::max_completion_tokens,
       "the newer name of max_tokens; wins over it", {.min = 1}},
      {"tool_choice", CustomField<ChatCompletionRequest>{ReadToolChoice, ToolChoiceSchema},
       "auto (the default with tools), none, required, or {\"type\": \"function\", \"function\": {\"name\"}} "
       "naming one of tools"},
      {"echo", &ChatCompletionRequest::echo,
       "vLLM's echo: the final message's content starts the reply when that message has the role being generated "
       "(the assistant's with add_generation_prompt, else its own)"},
      {"logprobs", &ChatCompletionRequest::logprobs, "log probabilities of the chosen tokens"},
      {"top_logprobs", &ChatCompletionRequest::top_logprobs, "and of this many top tokens; needs logprobs: true",
       {.min = 0, .max = SamplingParams::kMaxLogprobs}, false, {{"logprobs", true}}},
      {"mm_processor_kwargs",
       CustomField<ChatCompletionRequest>{
           [](const json& v, FieldReader& r, ChatCompletionRequest* c) {
             const char* kShape = "'mm_processor_kwargs' must be an object whose only member is use_audio_in_video (a "
                                  "boolean)";
             if (!v.is_object()) return r.Fail(BadRequest(kShape, "mm_processor_kwargs"));
             for (const auto& [key, value] : v.items()) {
               if (key != "use_audio_in_video" || !value.is_boolean()) {
                 return r.Fail(BadRequest(kShape, "mm_processor_kwargs"));
               }
               c->use_audio_in_video = value.get<bool>();
             }
           },
           [] {
             return json{{"type", "object"},
                         {"properties", {{"use_audio_in_video", {{"type", "boolean"}}}}},
                         {"additionalProperties", false}};
           }},
       "multimodal processing options: use_audio_in_video feeds each video's audio track to the audio encoder after "
       "its frames"},
  };
  return fields;
}

// /tokenize has vLLM's two shapes: a prompt (TokenizeCompletionRequest) or a conversation
// (TokenizeChatRequest: the ChatPromptFields too). The field that picks one is refused in the other.
const std::vector<Field<TokenizeRequest>>& TokenizeFields(bool chat) {
  auto make = [](bool chat) {
    std::vector<Field<TokenizeRequest>> f = {
        {"model", &TokenizeRequest::model, "the served model's name (another is a 404); empty or absent: that one"},
    };
    if (chat) {
      f.push_back({"prompt", CustomField<TokenizeRequest>{
                                 [](const json&, FieldReader& r, TokenizeRequest*) {
                                   r.Fail(BadRequest("give either 'prompt' or 'messages', not both", "prompt"));
                                 },
                                 [] { return json{{"type", "null"}}; }},
                   "not with messages"});
    } else {
      f.push_back({"prompt", &TokenizeRequest::prompt, "the text to tokenize", {}, /*required=*/true});
      f.push_back({"messages", CustomField<TokenizeRequest>{
                                   [](const json&, FieldReader& r, TokenizeRequest*) {
                                     r.Fail(BadRequest("give either 'prompt' or 'messages', not both", "prompt"));
                                   },
                                   [] { return json{{"type", "null"}}; }},
                   "not with prompt"});
    }
    f.push_back({"add_special_tokens", &TokenizeRequest::add_special_tokens,
                 chat ? "add the tokenizer's BOS and the like on top of the rendered template (which writes them itself)"
                      : "add the tokenizer's BOS and the like"});
    f.push_back({"return_token_strs", &TokenizeRequest::return_token_strs,
                 "also the ids' vocabulary strings (token_strs), as transformers' convert_ids_to_tokens"});
    return f;
  };
  static const std::vector<Field<TokenizeRequest>> prompt_fields = make(false), chat_fields = make(true);
  return chat ? chat_fields : prompt_fields;
}

// The chat shape of /tokenize: messages, or no prompt and a field only a conversation has (so that
// {"add_generation_prompt": true} is told 'messages' is required).
bool IsTokenizeChat(const FieldReader& r) {
  if (r.Has("messages")) return true;
  if (r.Has("prompt")) return false;
  for (const Field<ChatPrompt>& f : ChatPromptFields()) {
    if (r.Has(f.name)) return true;
  }
  return false;
}

// The defaults of each shape: a conversation's template writes BOS itself.
TokenizeRequest TokenizeDefaults(bool chat) {
  TokenizeRequest t;
  t.add_special_tokens = !chat;
  return t;
}

const std::vector<Field<DetokenizeRequest>>& DetokenizeFields() {
  static const std::vector<Field<DetokenizeRequest>> fields = {
      {"model", &DetokenizeRequest::model, "the served model's name (another is a 404); empty or absent: that one"},
      {"tokens", &DetokenizeRequest::tokens, "token ids (in the vocabulary)", {.min = 0}, /*required=*/true},
  };
  return fields;
}

}  // namespace

std::string ContentText(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (!content.is_array()) return text;
  bool first = true;
  for (const json& part : content) {
    if (!IsObjectWithStringMember(part, "text")) continue;
    if (!first) text += "\n";
    text += part["text"].get<std::string>();
    first = false;
  }
  return text;
}

std::variant<CompletionRequest, ApiError> ParseCompletionRequest(const json& body, const SamplingParams& defaults) {
  if (!body.is_object()) return BadRequest("the request body must be a JSON object");
  CompletionRequest c;
  c.common.sampling = defaults;
  FieldReader r(body);
  ReadCommon(body, r, &c.common);
  ReadFields(body, r, CompletionFields(), &c);
  if (!c.common.max_tokens_given) c.common.sampling.max_tokens = 16;  // OpenAI's default for completions
  if (c.logprobs) c.common.sampling.logprobs = *c.logprobs;
  if (r.error()) return *r.error();
  return c;
}

std::variant<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(const json& body,
                                                                         const SamplingParams& defaults) {
  if (!body.is_object()) return BadRequest("the request body must be a JSON object");
  ChatCompletionRequest c;
  c.common.sampling = defaults;
  FieldReader r(body);
  ReadCommon(body, r, &c.common);
  ReadChatPrompt(body, r, &c.chat);
  ReadFields(body, r, ChatFields(), &c);
  if (c.max_completion_tokens) {  // the newer name wins
    c.common.sampling.max_tokens = *c.max_completion_tokens;
    c.common.max_tokens_given = true;
  }
  if (!r.Has("tool_choice")) c.tool_choice = c.chat.tools.is_null() ? "none" : "auto";
  if (c.logprobs) c.common.sampling.logprobs = c.top_logprobs.value_or(0);
  if (r.error()) return *r.error();
  return c;
}

std::variant<TokenizeRequest, ApiError> ParseTokenizeRequest(const json& body) {
  if (!body.is_object()) return BadRequest("the request body must be a JSON object");
  FieldReader r(body);
  const bool chat = IsTokenizeChat(r);
  TokenizeRequest t = TokenizeDefaults(chat);
  if (chat) {
    ReadChatPrompt(body, r, &t.chat.emplace());
  } else if (!r.Has("prompt")) {
    r.Fail(BadRequest("'prompt' (a string) or 'messages' (a chat) is required", "prompt"));
  }
  ReadFields(body, r, TokenizeFields(chat), &t);
  if (r.error()) return *r.error();
  return t;
}

std::variant<DetokenizeRequest, ApiError> ParseDetokenizeRequest(const json& body) {
  if (!body.is_object()) return BadRequest("the request body must be a JSON object");
  DetokenizeRequest d;
  FieldReader r(body);
  ReadFields(body, r, DetokenizeFields(), &d);
  if (r.error()) return *r.error();
  return d;
}

json CompletionRequestSchema(const SamplingParams& defaults) {
  json schema;
  AddCommonSchema(defaults, &schema);
  AddFieldsSchema(CompletionFields(), CompletionRequest{}, &schema);
  return schema;
}

json ChatCompletionRequestSchema(const SamplingParams& defaults) {
  json schema;
  AddCommonSchema(defaults, &schema);
  AddFieldsSchema(ChatPromptFields(), ChatPrompt{}, &schema);
  AddFieldsSchema(ChatFields(), ChatCompletionRequest{}, &schema);
  return schema;
}

json TokenizeRequestSchema() {
  json prompt = {{"title", "TokenizeCompletionRequest"}, {"type", "object"}, {"properties", json::object()}};
  AddFieldsSchema(TokenizeFields(false), TokenizeDefaults(false), &prompt);
  json chat = {{"title", "TokenizeChatRequest"}, {"type", "object"}, {"properties", json::object()}};
  AddFieldsSchema(ChatPromptFields(), ChatPrompt{}, &chat);
  AddFieldsSchema(TokenizeFields(true), TokenizeDefaults(true), &chat);
  return {{"description", "vLLM's two shapes: a prompt, or messages rendered with the chat template as "
                          "/v1/chat/completions renders them"},
          {"oneOf", json::array({std::move(prompt), std::move(chat)})}};
}

json DetokenizeRequestSchema() {
  json schema;
  AddFieldsSchema(DetokenizeFields(), DetokenizeRequest{}, &schema);
  return schema;
}

}  // namespace ember::server
