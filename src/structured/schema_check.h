// JSON Schema keywords the grammar engine cannot enforce. xgrammar only logs a warning and drops
// them (so an output could break them while claiming to follow the schema); ember answers 400
// naming the keyword and where it is instead, as the issue asks.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ember::structured {

// The first unsupported keyword in `schema`, as "'uniqueItems' at /properties/tags", or nullopt.
// Also refuses a string `format` xgrammar has no pattern for.
std::optional<std::string> FindUnsupportedKeyword(const nlohmann::json& schema);

}  // namespace ember::structured
