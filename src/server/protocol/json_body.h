// Request bodies as JSON, parsed so that no body can blow up the server: nesting deeper than
// kMaxJsonDepth is refused before any deep value is built (nlohmann's parser is iterative, but
// copying, dumping and rendering a parsed value recurse, and 100k levels overflow the stack);
// numbers that overflow a double, invalid UTF-8 and syntax errors are 400s that name where they
// are ('messages[0].content') and quote none of the request's bytes.
#pragma once

#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "server/protocol/api_error.h"

namespace ember::server {

// Deep enough for any tool schema or chat_template_kwargs seen in practice (serde_json's default
// limit), shallow enough that every recursive consumer stays far from the stack's end.
inline constexpr int kMaxJsonDepth = 128;

// A JSON object (keys in their original order), or a 400 whose `param` is the top-level field
// the problem is in, when it is in one.
std::variant<nlohmann::ordered_json, ApiError> ParseJsonObject(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace ember::server
