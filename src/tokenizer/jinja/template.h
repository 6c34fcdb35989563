// A compiled Jinja template: the public entry point of the engine.
//
// The engine implements the subset of Jinja that chat templates use, with the semantics of
// Python's jinja2 in the environment Hugging Face's apply_chat_template renders in (see
// src/tokenizer/jinja/README.md for the supported subset and how it was verified).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/value.h"

namespace ember::jinja {

namespace ast {
struct Template;
}

class Template {
 public:
  // Parses `source`. Syntax errors and unsupported tags fail here, naming line and column.
  static Expected<Template> Parse(std::string_view source);

  // Renders with `variables` as the template's context (on top of the globals HF provides).
  // Errors name the construct and its position; raise_exception() messages are passed through.
  Expected<std::string> Render(const std::vector<std::pair<std::string, Value>>& variables,
                               const RenderOptions& options = {}) const;

  // Whether the template loops over a message's content (`for part in message['content']`), so
  // that it wants content parts as a list rather than joined into a string; decided from the
  // syntax tree as vLLM decides its "openai" content format (content_loops.cc).
  bool LoopsOverMessageContent() const;

 private:
  explicit Template(std::shared_ptr<const ast::Template> root) : root_(std::move(root)) {}
  std::shared_ptr<const ast::Template> root_;
};

}  // namespace ember::jinja
