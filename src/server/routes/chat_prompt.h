// The prompt a conversation renders to with the model's chat template: what /v1/chat/completions
// generates from and /tokenize with `messages` shows, so the two always agree.
#pragma once

#include <string>
#include <variant>

#include "server/protocol/api_error.h"
#include "server/protocol/requests.h"
#include "server/serving_context.h"

namespace ember::server {

// Renders `chat` as transformers' apply_chat_template(..., tokenize=False) does, with the model's
// BOS/EOS texts as bos_token/eos_token and chat_template_kwargs as extra variables. Content parts
// go to templates that loop over them (Gemma 3's) as the list, to the others as their texts joined
// by "\n" (vLLM's two content formats). `with_tools`: pass chat.tools to the template. A model
// without a template, or a template error (continue_final_message whose text the render lacks
// included), is a 400.
// One message's content list as the template sees it: for templates that loop over parts, the
// parts with each media part as {"type": "image"|"video"|"audio"} (vLLM's form); for the others,
// the parts' texts joined by "\n" with each media part as `multimodal`'s placeholder text (media
// parts are dropped when it is null: the route refuses them first).
nlohmann::ordered_json TemplateContent(const nlohmann::ordered_json& content, bool wants_parts,
                                       const MultiModalProcessor* multimodal);

std::variant<std::string, ApiError> RenderChatPrompt(const ServingModel& model, const ChatPrompt& chat,
                                                     bool with_tools = true);

// The prompt's token ids: the render tokenized with special tokens parsed and, when
// add_special_tokens, BOS/EOS added on top (the template writes them itself).
std::vector<int32_t> TokenizeChatPrompt(const ServingModel& model, const std::string& prompt,
                                        bool add_special_tokens = false);

// The conversation's media parts (image_url, input_audio, video_url, audio_url) decoded,
// preprocessed and expanded into `ids` (the tokenized render, MultiModalProcessor::Expand); the
// features that fill the expanded positions. No media: `ids` unchanged and no features. A model
// that takes no media, or a bad part, is a 400 naming the part.
std::variant<std::vector<MultiModalFeature>, ApiError> ExpandChatMedia(const ServingContext& context,
                                                                       const ChatPrompt& chat,
                                                                       bool use_audio_in_video,
                                                                       std::vector<int32_t>* ids);

}  // namespace ember::server
