// The OpenAI request bodies ember accepts, parsed from JSON into native values. This folder is the
// only place JSON exists (ARCHITECTURE.md); the engine sees SamplingParams and token ids.
//
// Every field is a row of a table in requests.cc (request_fields.h): the parsers read bodies
// through the tables and the *Schema functions below write the OpenAPI request schemas from them.
//
// Fields follow the OpenAI API plus vLLM's extras (top_k, min_p, repetition_penalty, min_tokens,
// ignore_eos, stop_token_ids, priority, cache_salt, include_stop_str_in_output). Unknown fields are
// ignored, as OpenAI and vLLM do; fields ember does not implement yet are rejected with a message
// saying so rather than silently dropped.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/kv_transfer_params.h"
#include "engine/sampling_params.h"
#include "server/protocol/api_error.h"
#include "structured/constraint_spec.h"

namespace ember::server {

// Fields shared by /v1/completions and /v1/chat/completions.
struct CommonRequest {
  std::string model;
  SamplingParams sampling;          // without max_tokens in the request: the route's default
  bool max_tokens_given = false;    // false: max_tokens is a default, cut to what the context has left
  std::optional<int32_t> max_tokens;  // as sent; sampling.max_tokens holds the one in effect
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  int32_t priority = 0;
  std::string cache_salt;
  std::string user;
  // Prefill/decode disaggregation (vLLM's kv_transfer_params; protocol/kv_transfer_params.h).
  KvTransferRequest kv_transfer;
  // Structured output (structured_outputs.h); compiled per choice by MakeChoices.
  std::optional<structured::ConstraintSpec> constraint;
  std::string constraint_field;     // the request field it came from, for 400s
};

struct Prompt {
  std::string text;                 // used when token_ids is empty
  std::vector<int32_t> token_ids;
};

struct CompletionRequest {
  CommonRequest common;
  std::vector<Prompt> prompts;      // `prompt`: a string, strings, token ids, or arrays of token ids
  bool echo = false;
  std::optional<int32_t> logprobs;  // as sent; copied into sampling
};

// A conversation for the chat template: what /v1/chat/completions and /tokenize with `messages`
// share (routes/chat_prompt.h renders it).
struct ChatPrompt {
  // Validated: an array of {role, content, ...} without null members. Content is a string ("" for
  // an assistant's that was null or absent: tool calls only), or a list of text parts, kept as a
  // list: templates that loop over parts get it as it is, the others the texts joined by "\n"
  // (ChatTemplate::wants_content_parts).
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;     // null or an array of {"type": "function", "function": {...}}
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // never together with add_generation_prompt
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
};

struct ChatCompletionRequest {
  CommonRequest common;
  ChatPrompt chat;
  // "auto" (default with tools), "none", "required", or a function name to force.
  std::string tool_choice = "auto";
  std::string forced_function;      // set when tool_choice names a function
  // vLLM's echo: the reply starts with the final message's content when that message has the role
  // being generated (assistant with add_generation_prompt, else the final message's own role).
  bool echo = false;
  // As sent; copied into common.
  std::optional<int32_t> max_completion_tokens;
  bool logprobs = false;
  std::optional<int32_t> top_logprobs;
  // mm_processor_kwargs {"use_audio_in_video": true}: each video's audio track goes through the
  // audio encoder too, after its frames.
  bool use_audio_in_video = false;
};

// POST /tokenize, vLLM's two shapes: `prompt` (TokenizeCompletionRequest) or `messages`
// (TokenizeChatRequest, rendered with the chat template like a chat request).
struct TokenizeRequest {
  std::string model;
  std::optional<ChatPrompt> chat;   // set when the body has `messages`
  std::string prompt;
  // BOS/EOS on top of the text: default true for a prompt, false for messages (the template
  // writes them), as in vLLM.
  bool add_special_tokens = true;
  bool return_token_strs = false;   // also the vocabulary string of each id (token_strs)
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

// The text of a message's content: the string itself, or the text parts joined by "\n" (what vLLM
// joins them with); "" for anything else.
std::string ContentText(const nlohmann::ordered_json& content);

// Parse and validate a request body. Fields the request leaves out keep their value in `defaults`
// (the model's generation config; for chat, its max_tokens is the server's --default-max-tokens;
// completions default to OpenAI's 16). Errors are 400s naming the field.
std::variant<CompletionRequest, ApiError> ParseCompletionRequest(const nlohmann::ordered_json& body,
                                                                 const SamplingParams& defaults = {});
std::variant<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(const nlohmann::ordered_json& body,
                                                                         const SamplingParams& defaults = {});
std::variant<TokenizeRequest, ApiError> ParseTokenizeRequest(const nlohmann::ordered_json& body);
std::variant<DetokenizeRequest, ApiError> ParseDetokenizeRequest(const nlohmann::ordered_json& body);

// The JSON Schemas of those bodies, written from the tables the parsers read; `defaults` as above.
// TokenizeRequestSchema is vLLM's two shapes as a oneOf: [prompt, messages].
nlohmann::ordered_json CompletionRequestSchema(const SamplingParams& defaults = {});
nlohmann::ordered_json ChatCompletionRequestSchema(const SamplingParams& defaults = {});
nlohmann::ordered_json TokenizeRequestSchema();
nlohmann::ordered_json DetokenizeRequestSchema();

}  // namespace ember::server
