#include "tools/ember/chat_session.h"

#include <algorithm>

#include "model/sequence.h"
#include "tokenizer/model_tokenizer.h"

namespace ember::tools {

Expected<std::unique_ptr<ChatSession>> ChatSession::Create(const std::string& model_path, CausalLM* model,
                                                          kv::KvDtype kv_dtype) {
  std::unique_ptr<ChatSession> session(new ChatSession());
  session->model_ = model;
  session->kv_dtype_ = kv_dtype;
  EMBER_ASSIGN_OR_RETURN(session->tokenizer_, LoadModelTokenizer(model_path));
  EMBER_ASSIGN_OR_RETURN(std::string source, LoadModelChatTemplateSource(model_path));
  EMBER_ASSIGN_OR_RETURN(ChatTemplate parsed, ChatTemplate::Parse(std::move(source)));
  session->template_ = std::make_unique<ChatTemplate>(std::move(parsed));
  return session;
}

Expected<std::vector<int32_t>> ChatSession::PromptWith(const std::string& user_text) const {
  ChatTemplateInputs inputs;
  inputs.messages = messages_;
  inputs.messages.push_back({{"role", "user"}, {"content", user_text}});
  inputs.add_generation_prompt = true;
  const Tokenizer& t = *tokenizer_;
  if (t.spec().bos_id >= 0) inputs.bos_token = t.TokenText(t.spec().bos_id);
  if (t.spec().eos_id >= 0) inputs.eos_token = t.TokenText(t.spec().eos_id);
  EMBER_ASSIGN_OR_RETURN(std::string rendered, template_->Render(inputs));
  // The template writes BOS itself when the model wants one, so only special-token parsing here.
  return t.Encode(rendered, /*add_special=*/false, /*parse_special=*/true);
}

Expected<std::string> ChatSession::Reply(const std::string& user_text, int64_t max_tokens,
                                         const std::function<void(const std::string&)>& on_text) {
  EMBER_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, PromptWith(user_text));
  const int64_t prompt_tokens = static_cast<int64_t>(prompt.size());
  EMBER_ASSIGN_OR_RETURN(Sequence sequence, Sequence::Create(model_, prompt_tokens + max_tokens, kv_dtype_));
  std::vector<float> logits;
  EMBER_RETURN_IF_ERROR(sequence.Append(prompt.data(), prompt_tokens, false, &logits));
  const auto& stops = model_->info().eos_token_ids;
  IncrementalDetokenizer detokenizer(tokenizer_.get(), /*skip_special=*/true);
  std::string reply;
  for (int64_t step = 0; step < max_tokens; ++step) {
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    // End of turn: the model's EOS, or any control token the template uses to close a turn.
    if (std::find(stops.begin(), stops.end(), next) != stops.end() || tokenizer_->IsSpecial(next)) break;
    const std::string piece = detokenizer.Add(next);
    reply += piece;
    if (!piece.empty()) on_text(piece);
    EMBER_RETURN_IF_ERROR(sequence.Append(&next, 1, false, &logits));
  }
  const std::string tail = detokenizer.Flush();
  reply += tail;
  if (!tail.empty()) on_text(tail);
  messages_.push_back({{"role", "user"}, {"content", user_text}});
  messages_.push_back({{"role", "assistant"}, {"content", reply}});
  return reply;
}

}  // namespace ember::tools
