// A conversation with a model: its tokenizer and chat template, the message history, and greedy
// generation of the assistant's reply through the engine. Shared by `ember generate --chat` and
// `ember chat`. Each reply is one request whose prompt is the whole conversation so far; the
// engine's prefix cache finds the earlier turns' KV, so only the new turn is computed.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/local_engine.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ember::tools {

class ChatSession {
 public:
  // Loads the tokenizer and chat template of `model_path` for the model `engine` runs (which
  // outlives the session).
  static Expected<std::unique_ptr<ChatSession>> Create(const std::string& model_path, LocalEngine* engine);

  // Token ids of the conversation so far plus `user_text`, rendered with the generation prompt.
  Expected<std::vector<int32_t>> PromptWith(const std::string& user_text) const;
  // Appends the user turn, generates up to max_tokens greedily (stopping at end-of-turn tokens),
  // streams text pieces to `on_text` as they complete, and appends the assistant turn.
  Expected<std::string> Reply(const std::string& user_text, int64_t max_tokens,
                              const std::function<void(const std::string&)>& on_text);
  // Forgets the conversation (its KV stays in the prefix cache until the pool needs the blocks).
  void Reset() { messages_ = nlohmann::ordered_json::array(); }
  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  ChatSession() = default;

  EngineClient* client_ = nullptr;
  std::vector<int32_t> eos_token_ids_;
  // The end of a turn: the model's EOS ids and every control token the template may close a turn
  // with, as the request's stop tokens.
  std::vector<int32_t> stop_token_ids_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> template_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
};

}  // namespace ember::tools
