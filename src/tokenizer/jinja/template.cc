#include "tokenizer/jinja/template.h"

#include "tokenizer/jinja/parser.h"

namespace ember::jinja {

Expected<Template> Template::Parse(std::string_view source) {
  EMBER_ASSIGN_OR_RETURN(std::shared_ptr<const ast::Template> root, ParseTemplate(source));
  return Template(std::move(root));
}

Expected<std::string> Template::Render(const std::vector<std::pair<std::string, Value>>& variables,
                                       const RenderOptions& options) const {
  // Globals sit below the caller's variables, so a variable may shadow a global as in jinja2.
  auto globals = std::make_shared<Frame>(nullptr);
  AddGlobals(*globals);
  auto context = std::make_shared<Frame>(globals);
  for (const auto& [name, value] : variables) context->Set(name, value);
  Interpreter interpreter(options);
  std::string out;
  EMBER_RETURN_IF_ERROR(interpreter.Render(*root_, context, &out));
  return out;
}

}  // namespace ember::jinja
