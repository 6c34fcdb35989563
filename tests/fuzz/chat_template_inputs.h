// Inputs shared by the two chat-template fuzz targets: a conversation with every message shape
// (system, user with text parts, assistant with tool calls and reasoning, tool results), tool
// schemas, a pinned clock, and render limits lower than the defaults (the fuzzer should try many
// templates quickly; the limits are the same code paths whatever their values).
#pragma once

#include <ctime>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

namespace ember::fuzz {

inline void FuzzLimits(ChatTemplateInputs* in) {
  in->limits.max_steps = 200000;
  in->limits.max_bytes = 4 << 20;
  std::tm now{};
  now.tm_year = 126;
  now.tm_mon = 0;
  now.tm_mday = 2;
  in->now = now;
}

inline ChatTemplateInputs FixedConversation() {
  ChatTemplateInputs in;
  in.messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": [{"type": "text", "text": "caf\u00e9 \u20ac <|im_end|>"}, {"type": "image"}]},
    {"role": "assistant", "content": null, "reasoning_content": "think",
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get", "arguments": {"q": 1}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "42"},
    {"role": "assistant", "content": "  done\n"}
  ])");
  in.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "get",
    "description": "d", "parameters": {"type": "object", "properties": {"q": {"type": "integer"}}}}}])");
  in.add_generation_prompt = true;
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.extra = {{"enable_thinking", true}, {"reasoning_effort", "high"}};
  FuzzLimits(&in);
  return in;
}

}  // namespace ember::fuzz
