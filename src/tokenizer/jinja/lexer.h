// Splits Jinja source into template text and tag tokens, applying whitespace control.
//
// The environment is fixed to what Hugging Face's apply_chat_template uses: trim_blocks=True (the
// first newline after a block or comment tag is dropped), lstrip_blocks=True (spaces and tabs
// before a block or comment tag that starts a line are dropped), keep_trailing_newline=False, and
// the default delimiters. "-" and "+" modifiers on tags behave as in jinja2's lexer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ember::jinja {

enum class TokenKind {
  kText,        // literal template text (whitespace control already applied)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // value holds the decoded literal
  kInt,
  kFloat,
  kOperator,    // value holds the operator text, e.g. "**" or "|"
  kEof,
};

struct Token {
  TokenKind kind;
  std::string value;
  int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;
  int column = 1;
};

// Tokenizes `source`. Errors (unterminated tags, strings or comments, unbalanced brackets,
// unexpected characters) say what is wrong and where.
Expected<std::vector<Token>> Tokenize(std::string_view source);

// "line 3, column 7", for error messages.
std::string Location(int line, int column);

}  // namespace ember::jinja
