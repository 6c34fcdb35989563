#include "tools/ember/chat_session.h"

#include <algorithm>

#include "tokenizer/model_tokenizer.h"
#include "tools/ember/offline_engine.h"

namespace ember::tools {

Expected<std::unique_ptr<ChatSession>> ChatSession::Create(const std::string& model_path, LocalEngine* engine) {
  std::unique_ptr<ChatSession> session(new ChatSession());
  session->client_ = &engine->client();
  session->eos_token_ids_ = engine->eos_token_ids();
  EMBER_ASSIGN_OR_RETURN(session->tokenizer_, LoadModelTokenizer(model_path));
  EMBER_ASSIGN_OR_RETURN(std::string source, LoadModelChatTemplateSource(model_path));
  EMBER_ASSIGN_OR_RETURN(ChatTemplate parsed, ChatTemplate::Parse(std::move(source)));
  session->template_ = std::make_unique<ChatTemplate>(std::move(parsed));
  // Only ids the model can sample: a tokenizer may list more tokens than the model's head has.
  const int32_t vocab = std::min<int32_t>(session->tokenizer_->vocab_size(),
                                          static_cast<int32_t>(engine->model().info().vocab_size));
  for (int32_t id = 0; id < vocab; ++id) {
    if (session->tokenizer_->IsSpecial(id)) session->stop_token_ids_.push_back(id);
  }
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
  RequestInput input;
  input.external_id = "chat";
  EMBER_ASSIGN_OR_RETURN(input.prompt_token_ids, PromptWith(user_text));
  input.sampling.temperature = 0.0f;
  input.sampling.max_tokens = static_cast<int32_t>(max_tokens);
  input.sampling.stop_token_ids = stop_token_ids_;
  AddModelStops(eos_token_ids_, &input);
  IncrementalDetokenizer detokenizer(tokenizer_.get(), /*skip_special=*/true);
  std::string reply, error;
  client_->Submit(std::move(input));
  RunUntilDone(*client_, [&](RequestOutput& out) {
    size_t n = out.new_token_ids.size();
    if (out.stop_token) --n;  // the token that ended the turn is not part of the reply
    for (size_t i = 0; i < n; ++i) {
      const std::string piece = detokenizer.Add(out.new_token_ids[i]);
      reply += piece;
      if (!piece.empty()) on_text(piece);
    }
    if (out.finish_reason == FinishReason::kError) error = out.error;
  });
  if (!error.empty()) return InvalidArgument(error);
  const std::string tail = detokenizer.Flush();
  reply += tail;
  if (!tail.empty()) on_text(tail);
  messages_.push_back({{"role", "user"}, {"content", user_text}});
  messages_.push_back({{"role", "assistant"}, {"content", reply}});
  return reply;
}

}  // namespace ember::tools
