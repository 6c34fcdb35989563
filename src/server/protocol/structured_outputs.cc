#include "server/protocol/structured_outputs.h"

#include <fmt/format.h>

namespace ember::server {
namespace {

using json = nlohmann::ordered_json;
using structured::ConstraintSpec;
using Kind = ConstraintSpec::Kind;

// A schema may come as an object or as its JSON text (vLLM accepts both for guided_json).
std::optional<std::string> SchemaText(const json& v) {
  if (v.is_object() || v.is_boolean()) return v.dump();
  if (v.is_string()) {
    const json parsed = json::parse(v.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object() || parsed.is_boolean()) return parsed.dump();
  }
  return std::nullopt;
}

// One of vLLM's keys ({json, regex, choice, grammar, json_object}) with its value into *spec.
std::optional<ApiError> ReadKey(const std::string& key, const json& v, const std::string& field, ConstraintSpec* spec) {
  if (key == "json") {
    auto text = SchemaText(v);
    if (!text) return BadRequest(fmt::format("'{}' must be a JSON schema (an object)", field), field);
    spec->kind = Kind::kJsonSchema;
    spec->text = *text;
  } else if (key == "regex" || key == "grammar") {
    if (!v.is_string() || v.get<std::string>().empty()) {
      return BadRequest(fmt::format("'{}' must be a non-empty string", field), field);
    }
    spec->kind = key == "regex" ? Kind::kRegex : Kind::kGrammar;
    spec->text = v.get<std::string>();
  } else if (key == "choice") {
    if (!v.is_array() || v.empty()) return BadRequest(fmt::format("'{}' must be a non-empty array of strings", field), field);
    spec->kind = Kind::kChoice;
    for (const json& c : v) {
      if (!c.is_string()) return BadRequest(fmt::format("'{}' must be a non-empty array of strings", field), field);
      spec->choices.push_back(c.get<std::string>());
    }
  } else if (key == "json_object") {
    if (!v.is_boolean()) return BadRequest(fmt::format("'{}' must be a boolean", field), field);
    spec->kind = Kind::kJsonObject;
  }
  return std::nullopt;
}

std::optional<ApiError> ReadResponseFormat(const json& v, ConstraintSpec* spec, bool* constrained) {
  const std::string field = "response_format";
  if (!v.is_object() || !v.contains("type") || !v["type"].is_string()) {
    return BadRequest("'response_format' must be {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}", field);
  }
  const std::string type = v["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    spec->kind = Kind::kJsonObject;
  } else if (type == "json_schema") {
    if (!v.contains("json_schema") || !v["json_schema"].is_object() || !v["json_schema"].contains("schema")) {
      return BadRequest("'response_format' json_schema needs {\"json_schema\": {\"name\": ..., \"schema\": {...}}}", field);
    }
    auto text = SchemaText(v["json_schema"]["schema"]);
    if (!text) return BadRequest("'response_format.json_schema.schema' must be a JSON schema (an object)", field);
    spec->kind = Kind::kJsonSchema;
    spec->text = *text;
  } else {
    return BadRequest(fmt::format("'response_format' type '{}' is not one of text, json_object, json_schema",
                                  type.substr(0, 64)),
                      field);
  }
  *constrained = true;
  return std::nullopt;
}

}  // namespace

void ParseStructuredOutputs(const json& body, FieldReader& r, CommonRequest* c) {
  ConstraintSpec spec;
  std::vector<std::string> given;  // the fields that asked for a constraint
  if (r.Has("response_format")) {
    bool constrained = false;
    if (auto e = ReadResponseFormat(body["response_format"], &spec, &constrained)) return r.Fail(*e);
    if (constrained) given.push_back("response_format");
  }
  if (r.Has("structured_outputs")) {
    const json& so = body["structured_outputs"];
    if (!so.is_object()) return r.Fail(BadRequest("'structured_outputs' must be an object", "structured_outputs"));
    for (const auto& [key, value] : so.items()) {
      if (value.is_null()) continue;
      if (key != "json" && key != "regex" && key != "choice" && key != "grammar" && key != "json_object") {
        // whitespace_pattern, structural_tag and the like: refused rather than ignored.
        return r.Fail(BadRequest(fmt::format("'structured_outputs.{}' is not supported", key.substr(0, 64)),
                                 "structured_outputs"));
      }
      if (key == "json_object" && value == false) continue;
      if (auto e = ReadKey(key, value, "structured_outputs." + key, &spec)) return r.Fail(*e);
      given.push_back("structured_outputs." + key);
    }
  }
  for (const char* key : {"json", "regex", "choice", "grammar"}) {
    const std::string field = std::string("guided_") + key;
    if (!r.Has(field)) continue;
    if (auto e = ReadKey(key, body[field], field, &spec)) return r.Fail(*e);
    given.push_back(field);
  }
  if (given.empty()) return;
  if (given.size() > 1) {
    return r.Fail(BadRequest(fmt::format("only one structured output may be asked for; got '{}' and '{}'", given[0],
                                         given[1]),
                             given[1]));
  }
  c->constraint = std::move(spec);
  c->constraint_field = given[0];
}

}  // namespace ember::server
