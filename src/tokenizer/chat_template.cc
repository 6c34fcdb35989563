#include "tokenizer/chat_template.h"

#include <exception>
#include <utility>
#include <vector>

#include "tokenizer/jinja/pystr.h"

namespace ember {
namespace {

using nlohmann::ordered_json;

// What apply_chat_template and render_jinja_template do to each message before rendering:
// drop keys whose value is None, then fill `thinking` and `reasoning_content` from whichever of
// reasoning_content / thinking / reasoning is set ({"thinking": r, **message, "reasoning_content": r}).
Expected<ordered_json> PrepareMessage(const ordered_json& message, size_t index) {
  if (!message.is_object()) {
    return InvalidArgument("chat message " + std::to_string(index) + " is not an object: " + message.dump());
  }
  ordered_json kept = ordered_json::object();
  for (const auto& [key, value] : message.items()) {
    if (!value.is_null()) kept[key] = value;
  }
  const ordered_json* reasoning = nullptr;
  for (const char* field : {"reasoning_content", "thinking", "reasoning"}) {
    if (kept.contains(field)) {
      reasoning = &kept[field];
      break;
    }
  }
  if (reasoning == nullptr) return kept;
  ordered_json aliased = ordered_json::object();
  aliased["thinking"] = *reasoning;
  for (const auto& [key, value] : kept.items()) aliased[key] = value;
  aliased["reasoning_content"] = *reasoning;
  return aliased;
}

// Whether `j` nests deeper than `limit` containers; checked before the recursive conversion so
// that hostile inputs cannot exhaust the stack.
bool TooDeep(const ordered_json& j, int limit) {
  if (!j.is_structured()) return false;
  if (limit == 0) return true;
  for (const auto& item : j) {
    if (TooDeep(item, limit - 1)) return true;
  }
  return false;
}

// transformers' continue_final_message: a tag is appended to the final message's content (to its
// last text part when the content is a list) before rendering, and the render is cut where the
// tag lands. A template that trims the content also trims the tag's trailing space, and then the
// cut drops trailing whitespace too. Comparing the raw content with the render instead fails on
// such templates (Gemma 3's `| trim`), which is why the tag.
constexpr std::string_view kContinueTag = "CONTINUE_FINAL_MESSAGE_TAG ";

// Tags the final message of `messages`; returns the text to continue.
Expected<std::string> TagFinalMessage(ordered_json& messages, const std::string& source) {
  if (messages.empty()) return InvalidArgument("continue_final_message is set but the conversation is empty!");
  ordered_json& final_message = messages.back();
  if (!final_message.contains("content")) {
    return InvalidArgument("continue_final_message is set but the final message has no \"content\" to continue!");
  }
  if (source.find("content") == std::string::npos) {
    return InvalidArgument(
        "continue_final_message is set to \"content\" but this is not an accepted field in the chat_template");
  }
  ordered_json& content = final_message["content"];
  if (content.is_array()) {
    for (auto it = content.rbegin(); it != content.rend(); ++it) {
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
        std::string text = (*it)["text"].get<std::string>();
        (*it)["text"] = text + std::string(kContinueTag);
        return text;
      }
    }
    return InvalidArgument("continue_final_message is set but we could not find any text to continue in the final "
                           "message!");
  }
  if (!content.is_string()) return InvalidArgument("continue_final_message: the final message's content is not text");
  std::string text = content.get<std::string>();
  content = text + std::string(kContinueTag);
  return text;
}

Status CutAtTag(const std::string& final_text, std::string* rendered) {
  const std::string_view tag = kContinueTag.substr(0, kContinueTag.size() - 1);  // stripped
  const std::string stripped = jinja::py::Strip(final_text, std::nullopt, true, true);
  if (rendered->find(stripped) == std::string::npos || rendered->find(tag) == std::string::npos) {
    return InvalidArgument(
        "continue_final_message is set but the final message does not appear in the chat after applying the chat "
        "template! This can happen if the chat template deletes portions of the final message. Please verify the "
        "chat template and final message in your chat to ensure they are compatible.");
  }
  const size_t at = rendered->rfind(tag);
  if (rendered->compare(at, kContinueTag.size(), kContinueTag) == 0) {
    rendered->resize(at);  // the template kept the message as it was
  } else {
    *rendered = jinja::py::Strip(std::string_view(*rendered).substr(0, at), std::nullopt, false, true);
  }
  return Status::Ok();
}

Expected<std::vector<std::pair<std::string, jinja::Value>>> BuildContext(const ChatTemplateInputs& in,
                                                                        const std::string& source,
                                                                        std::string* continued) {
  for (const ordered_json* j : {&in.messages, &in.tools, &in.extra}) {
    if (TooDeep(*j, jinja::kMaxValueDepth)) {
      return InvalidArgument("chat template inputs nest more than " + std::to_string(jinja::kMaxValueDepth) +
                             " levels deep");
    }
  }
  if (!in.messages.is_array()) return InvalidArgument("chat template messages must be a JSON array");
  if (in.messages.empty()) {
    // apply_chat_template refuses this before rendering.
    return InvalidArgument("Cannot apply chat template to an empty conversation. Provide at least one message.");
  }
  ordered_json messages = ordered_json::array();
  for (size_t i = 0; i < in.messages.size(); ++i) {
    EMBER_ASSIGN_OR_RETURN(ordered_json m, PrepareMessage(in.messages[i], i));
    messages.push_back(std::move(m));
  }
  if (in.continue_final_message) {
    if (in.add_generation_prompt) {
      return InvalidArgument("continue_final_message and add_generation_prompt are not compatible. Use "
                             "continue_final_message when you want the model to continue the final message, and "
                             "add_generation_prompt when you want to add a header that will prompt it to start a new "
                             "assistant message instead.");
    }
    EMBER_ASSIGN_OR_RETURN(*continued, TagFinalMessage(messages, source));
  }
  if (!in.tools.is_null()) {
    if (!in.tools.is_array()) return InvalidArgument("chat template tools must be null or a JSON array");
    for (const auto& tool : in.tools) {
      if (!tool.is_object()) return InvalidArgument("each tool must be a JSON schema object, got: " + tool.dump());
    }
  }
  if (!in.extra.is_null() && !in.extra.is_object()) {
    return InvalidArgument("chat template extra variables must be a JSON object");
  }
  // HF: template_kwargs = {**special_tokens_map, **kwargs}; render(messages=..., tools=...,
  // documents=None, add_generation_prompt=..., **template_kwargs).
  std::vector<std::pair<std::string, jinja::Value>> vars = {
      {"messages", jinja::FromJson(messages)},
      {"tools", jinja::FromJson(in.tools)},
      {"documents", jinja::Value::None()},
      {"add_generation_prompt", jinja::Value::Bool(in.add_generation_prompt)},
      {"bos_token", jinja::Value::Str(in.bos_token)},
      {"eos_token", jinja::Value::Str(in.eos_token)},
  };
  if (in.extra.is_object()) {
    for (const auto& [key, value] : in.extra.items()) {
      if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt") {
        return InvalidArgument("extra chat template variable '" + key + "' collides with a named input");
      }
      bool replaced = false;
      for (auto& [name, existing] : vars) {
        if (name == key) {
          existing = jinja::FromJson(value);
          replaced = true;
        }
      }
      if (!replaced) vars.emplace_back(key, jinja::FromJson(value));
    }
  }
  return vars;
}

}  // namespace

Expected<ChatTemplate> ChatTemplate::Parse(std::string source) {
  auto parsed = jinja::Template::Parse(source);
  if (!parsed.ok()) return parsed.status();
  return ChatTemplate(std::move(source), std::move(parsed).value());
}

Expected<std::string> ChatTemplate::Render(const ChatTemplateInputs& inputs) const {
  // nlohmann reports misuse by throwing; nothing may escape to callers.
  try {
    std::string continued;
    EMBER_ASSIGN_OR_RETURN(auto vars, BuildContext(inputs, source_, &continued));
    jinja::RenderOptions options;
    options.now = inputs.now;
    options.limits = inputs.limits;
    EMBER_ASSIGN_OR_RETURN(std::string rendered, template_.Render(vars, options));
    if (inputs.continue_final_message) EMBER_RETURN_IF_ERROR(CutAtTag(continued, &rendered));
    return rendered;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("chat template inputs are malformed: ") + e.what());
  }
}

}  // namespace ember
