// A conversation with a model: its tokenizer and chat template, the message history, and greedy
// generation of the assistant's reply. Shared by `ember generate --chat` and `ember chat`.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "model/causal_lm.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ember::tools {

class ChatSession {
 public:
  // Loads the tokenizer and chat template of `model_path` for an already loaded model; replies
  // keep their K/V as `kv_dtype`.
  static Expected<std::unique_ptr<ChatSession>> Create(const std::string& model_path, CausalLM* model,
                                                       kv::KvDtype kv_dtype);

  // Token ids of the conversation so far plus `user_text`, rendered with the generation prompt.
  Expected<std::vector<int32_t>> PromptWith(const std::string& user_text) const;
  // Appends the user turn, generates up to max_tokens greedily (stopping at end-of-turn tokens),
  // streams text pieces to `on_text` as they complete, and appends the assistant turn.
  Expected<std::string> Reply(const std::string& user_text, int64_t max_tokens,
                              const std::function<void(const std::string&)>& on_text);
  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  ChatSession() = default;

  CausalLM* model_ = nullptr;
  kv::KvDtype kv_dtype_ = kv::KvDtype::kF32;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> template_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
};

}  // namespace ember::tools
