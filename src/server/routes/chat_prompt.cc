#include "server/routes/chat_prompt.h"

#include "server/http_util.h"

namespace ember::server {

using json = nlohmann::ordered_json;

std::variant<std::string, ApiError> RenderChatPrompt(const ServingModel& model, const ChatPrompt& chat,
                                                     bool with_tools) {
  if (model.chat_template == nullptr) {
    return BadRequest("this model has no chat template; use /v1/completions");
  }
  const Tokenizer& tokenizer = *model.tokenizer;
  ChatTemplateInputs inputs;
  inputs.messages = chat.messages;
  if (!model.chat_template->wants_content_parts()) {
    for (json& m : inputs.messages) {
      if (m.contains("content") && m["content"].is_array()) m["content"] = ContentText(m["content"]);
    }
  }
  if (with_tools) inputs.tools = chat.tools;
  inputs.add_generation_prompt = chat.add_generation_prompt;
  inputs.continue_final_message = chat.continue_final_message;
  if (tokenizer.bos_id() >= 0) inputs.bos_token = tokenizer.TokenText(tokenizer.bos_id());
  if (tokenizer.eos_id() >= 0) inputs.eos_token = tokenizer.TokenText(tokenizer.eos_id());
  inputs.extra = chat.chat_template_kwargs;
  Expected<std::string> rendered = model.chat_template->Render(inputs);
  if (!rendered.ok()) {
    const bool continuing = rendered.status().message().rfind("continue_final_message", 0) == 0;
    return FromStatus(rendered.status(), continuing ? "continue_final_message" : "messages");
  }
  return std::move(*rendered);
}

std::vector<int32_t> TokenizeChatPrompt(const ServingModel& model, const std::string& prompt,
                                        bool add_special_tokens) {
  return model.tokenizer->Encode(prompt, add_special_tokens, /*parse_special=*/true);
}

}  // namespace ember::server
