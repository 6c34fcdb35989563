#include "structured/constraint_spec.h"

#include <fmt/format.h>

namespace ember::structured {

const char* ConstraintSpec::kind_name() const {
  switch (kind) {
    case Kind::kJsonObject: return "json_object";
    case Kind::kJsonSchema: return "json_schema";
    case Kind::kRegex: return "regex";
    case Kind::kChoice: return "choice";
    case Kind::kGrammar: return "grammar";
    case Kind::kToolCall: return "tool_call";
  }
  return "?";
}

std::string ConstraintSpec::CacheKey() const {
  // Length-prefixed fields, so that no two different specs share a key.
  std::string key = kind_name();
  auto add = [&key](const std::string& s) { key += fmt::format("|{}:{}", s.size(), s); };
  add(text);
  for (const std::string& c : choices) add(c);
  for (const ToolCallShape& t : tool_calls) {
    add(t.before);
    add(t.parameters_schema);
    add(t.after);
  }
  return key;
}

std::string EbnfLiteral(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      // \xHH names the code point U+00HH, which for these is the byte itself.
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);  // bytes of UTF-8 sequences pass through as characters
    }
  }
  return out + "\"";
}

}  // namespace ember::structured
