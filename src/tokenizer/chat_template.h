// Chat templates: renders a conversation to the prompt text a model was trained on, exactly as
// Hugging Face's tokenizer.apply_chat_template(..., tokenize=False) does.
//
// The template is Jinja source (tokenizer_config.json's chat_template, or GGUF's
// tokenizer.chat_template), run by ember's Jinja engine (src/tokenizer/jinja/) in HF's
// environment: trim_blocks, lstrip_blocks, loopcontrols, the {% generation %} tag, HF's tojson, and
// the raise_exception / strftime_now globals. The inputs are prepared as HF prepares them.
#pragma once

#include <ctime>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/jinja/template.h"

namespace ember {

struct ChatTemplateInputs {
  // OpenAI-style messages: [{"role": ..., "content": ..., "tool_calls": [...]}, ...]. Key order
  // matters (templates iterate dicts and print them with tojson), hence ordered_json; a plain
  // nlohmann::json converts implicitly, with its keys sorted.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // Tool schemas (null for none, else an array of objects), passed to the template as `tools`.
  nlohmann::ordered_json tools;
  bool add_generation_prompt = false;
  // apply_chat_template's continue_final_message: the render is cut right after the final
  // message's content (the last text part of a list), so that the model continues that message.
  // As in transformers the content is looked up stripped of surrounding whitespace, since
  // templates may trim it (Gemma 3's does); absent content, or content the render does not
  // contain, is an error. Cannot be combined with add_generation_prompt.
  bool continue_final_message = false;
  std::string bos_token;
  std::string eos_token;
  // More template variables, like apply_chat_template's **kwargs: enable_thinking,
  // reasoning_effort, date_string, ... They override bos_token/eos_token as in HF.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  // The local time strftime_now() sees; unset means the system clock. Set it for reproducible
  // renders (tests, caches).
  std::optional<std::tm> now;
  // How much work the render may do (steps, bytes built); past them Render fails with an
  // InvalidArgument naming the limit. The defaults leave real templates far inside.
  jinja::RenderLimits limits;
};

class ChatTemplate {
 public:
  // Compiles the template. Syntax errors and unsupported constructs fail here with their
  // line and column.
  static Expected<ChatTemplate> Parse(std::string source);

  // Renders the prompt. Template errors (including raise_exception() calls, whose message is
  // kept) come back as InvalidArgument; unsupported features as Unimplemented. Safe to call from
  // several threads at once.
  Expected<std::string> Render(const ChatTemplateInputs& inputs) const;

  const std::string& source() const { return source_; }

  // Whether the template iterates over a message's content parts and so must receive them as a
  // list (Gemma 3's); otherwise callers join text parts with "\n", as vLLM does for such
  // templates. Decided once, from the template's syntax (jinja::Template::LoopsOverMessageContent).
  bool wants_content_parts() const { return wants_content_parts_; }

 private:
  ChatTemplate(std::string source, jinja::Template tmpl)
      : source_(std::move(source)), template_(std::move(tmpl)), wants_content_parts_(template_.LoopsOverMessageContent()) {}
  std::string source_;
  jinja::Template template_;
  bool wants_content_parts_ = false;
};

}  // namespace ember
