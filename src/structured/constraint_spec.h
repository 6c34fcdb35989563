// What a request asks its output to follow, as plain data parsed from the API (server/protocol)
// and compiled by ConstraintCompiler. One kind per request, as in vLLM's structured_outputs.
#pragma once

#include <string>
#include <vector>

namespace ember::structured {

// One way a forced tool call may go on after the prompt's forced prefix: the literal text before
// the arguments (the function's name, for tool_choice "required"), the arguments' JSON schema and
// the literal text that closes the call.
struct ToolCallShape {
  std::string before;
  std::string parameters_schema;  // JSON text; "" = any object
  std::string after;
};

struct ConstraintSpec {
  enum class Kind { kJsonObject, kJsonSchema, kRegex, kChoice, kGrammar, kToolCall };
  Kind kind = Kind::kJsonObject;
  std::string text;                   // the schema (JSON text), the regex or the EBNF grammar
  std::vector<std::string> choices;   // kChoice: the output is exactly one of these
  std::vector<ToolCallShape> tool_calls;  // kToolCall: alternatives, one per allowed function

  // Equal keys compile to the same grammar (the compile cache's key).
  std::string CacheKey() const;
  // "json_schema", "regex", ...: for logs and error messages.
  const char* kind_name() const;
};

// `text` as an EBNF string literal ("..." with \", \\ and control characters escaped; UTF-8 kept),
// the form xgrammar's EBNF parser reads.
std::string EbnfLiteral(const std::string& text);

}  // namespace ember::structured
