#include "server/routes/chat_prompt.h"

#include <fmt/format.h>

#include "server/http_util.h"

namespace ember::server {

using json = nlohmann::ordered_json;

namespace {

// The modality a media part's type names, or none for text.
std::optional<Modality> MediaModality(const std::string& type) {
  if (type == "image_url") return Modality::kImage;
  if (type == "video_url") return Modality::kVideo;
  if (type == "audio_url" || type == "input_audio") return Modality::kAudio;
  return std::nullopt;
}

}  // namespace

json TemplateContent(const json& content, bool wants_parts, const MultiModalProcessor* multimodal) {
  if (wants_parts) {
    // As vLLM hands parts to templates: a media part is {"type": "image"} (or video, audio).
    json parts = json::array();
    for (const json& part : content) {
      const std::optional<Modality> m = MediaModality(part["type"].get<std::string>());
      parts.push_back(m ? json{{"type", ModalityName(*m)}} : part);
    }
    return parts;
  }
  // Parts joined by "\n", each media part as the placeholder the processor expands.
  std::string text;
  bool first = true;
  for (const json& part : content) {
    const std::optional<Modality> m = MediaModality(part["type"].get<std::string>());
    if (m && multimodal == nullptr) continue;
    if (!first) text += "\n";
    text += m ? multimodal->PlaceholderText(*m) : part["text"].get<std::string>();
    first = false;
  }
  return text;
}

std::variant<std::string, ApiError> RenderChatPrompt(const ServingModel& model, const ChatPrompt& chat,
                                                     bool with_tools) {
  if (model.chat_template == nullptr) {
    return BadRequest("this model has no chat template; use /v1/completions");
  }
  const Tokenizer& tokenizer = *model.tokenizer;
  ChatTemplateInputs inputs;
  inputs.messages = chat.messages;
  const bool wants_parts = model.chat_template->wants_content_parts();
  for (json& m : inputs.messages) {
    if (m.contains("content") && m["content"].is_array()) {
      m["content"] = TemplateContent(m["content"], wants_parts, model.multimodal.get());
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

std::variant<std::vector<MultiModalFeature>, ApiError> ExpandChatMedia(const ServingContext& context,
                                                                       const ChatPrompt& chat,
                                                                       bool use_audio_in_video,
                                                                       std::vector<int32_t>* ids) {
  const std::vector<MediaPart> media = CollectMediaParts(chat.messages);
  if (media.empty()) return std::vector<MultiModalFeature>();
  if (context.model.multimodal == nullptr) {
    return BadRequest(fmt::format("{}: this model takes text only (no image, video or audio inputs{})",
                                  media.front().field,
                                  context.config.language_model_only ? ": the server runs with --language-model-only"
                                                                     : ""),
                      "messages");
  }
  // Decoded and preprocessed here, on the handler thread.
  auto expanded = context.model.multimodal->Expand(*ids, media, use_audio_in_video);
  if (auto* e = std::get_if<ApiError>(&expanded)) return *e;
  *ids = std::move(std::get<ExpandedPrompt>(expanded).token_ids);
  return std::move(std::get<ExpandedPrompt>(expanded).features);
}

}  // namespace ember::server
