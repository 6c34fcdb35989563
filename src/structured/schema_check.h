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

// Replaces string formats whose xgrammar pattern is looser than the JSON Schema reference
// validators with an exact `pattern`: "ipv4" (xgrammar allows leading zeros, "020.1.1.1", which
// Python's ipaddress and the `jsonschema` package refuse). Schemas that give a pattern keep it.
void TightenFormats(nlohmann::json& schema);

}  // namespace ember::structured
