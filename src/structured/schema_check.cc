#include "structured/schema_check.h"

#include <fmt/format.h>

#include <array>
#include <string_view>

namespace ember::structured {
namespace {

// Keywords xgrammar 0.2.9's JSON-schema converter ignores (json_schema_converter.cc,
// WarnUnsupportedKeywords and the multipleOf-for-numbers warning).
constexpr std::array<std::string_view, 12> kUnsupported = {
    "not",      "if",          "then",        "else",        "dependentRequired", "dependentSchemas",
    "dependencies", "uniqueItems", "contains", "minContains", "maxContains",      "$dynamicRef"};

// String formats it has a pattern for.
constexpr std::array<std::string_view, 14> kFormats = {
    "email", "date", "time",          "date-time",    "duration",     "ipv4",        "ipv6",
    "hostname", "uuid", "uri", "uri-reference", "uri-template", "json-pointer", "relative-json-pointer"};

bool Known(auto& list, std::string_view s) {
  for (std::string_view k : list) {
    if (k == s) return true;
  }
  return false;
}

std::optional<std::string> Walk(const nlohmann::json& s, const std::string& path) {
  if (!s.is_object()) return std::nullopt;  // true/false schemas, or a value the compiler rejects
  for (const auto& [key, value] : s.items()) {
    if (Known(kUnsupported, key)) {
      return fmt::format("'{}' at {} is not supported by structured outputs", key, path.empty() ? "/" : path);
    }
  }
  if (s.contains("format") && s["format"].is_string()) {
    const std::string f = s["format"].get<std::string>();
    if (!Known(kFormats, f)) return fmt::format("'format': '{}' at {} is not supported", f, path.empty() ? "/" : path);
  }
  if (s.contains("multipleOf") && s.value("type", nlohmann::json()) != "integer") {
    return fmt::format("'multipleOf' at {} is supported only with \"type\": \"integer\"", path.empty() ? "/" : path);
  }
  // Every place a subschema may sit.
  for (const char* key : {"items", "additionalProperties", "propertyNames", "unevaluatedProperties",
                          "unevaluatedItems"}) {
    if (s.contains(key)) {
      if (auto e = Walk(s[key], fmt::format("{}/{}", path, key))) return e;
    }
  }
  for (const char* key : {"properties", "patternProperties", "$defs", "definitions"}) {
    if (!s.contains(key) || !s[key].is_object()) continue;
    for (const auto& [name, sub] : s[key].items()) {
      if (auto e = Walk(sub, fmt::format("{}/{}/{}", path, key, name))) return e;
    }
  }
  for (const char* key : {"anyOf", "oneOf", "allOf", "prefixItems"}) {
    if (!s.contains(key) || !s[key].is_array()) continue;
    for (size_t i = 0; i < s[key].size(); ++i) {
      if (auto e = Walk(s[key][i], fmt::format("{}/{}/{}", path, key, i))) return e;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> FindUnsupportedKeyword(const nlohmann::json& schema) { return Walk(schema, ""); }

void TightenFormats(nlohmann::json& schema) {
  static const std::string kOctet = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
  if (schema.is_array()) {
    for (nlohmann::json& item : schema) TightenFormats(item);
    return;
  }
  if (!schema.is_object()) return;
  if (schema.value("format", nlohmann::json()) == "ipv4" && !schema.contains("pattern")) {
    schema.erase("format");
    schema["pattern"] = "^" + kOctet + "(\\." + kOctet + "){3}$";
  }
  for (auto& [key, value] : schema.items()) {
    if (key != "enum" && key != "const" && key != "default" && key != "examples") TightenFormats(value);
  }
}

}  // namespace ember::structured
