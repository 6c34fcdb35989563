#include "server/protocol/structured_outputs.h"

#include <fmt/format.h>

#include "server/protocol/safe_text.h"

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
                                  SafeText(type)),
                      field);
  }
  *constrained = true;
  return std::nullopt;
}

// Records the constraint `field` asks for; a second one is a 400.
void Give(const std::string& field, ConstraintSpec spec, FieldReader& r, CommonRequest* c) {
  if (c->constraint) {
    return r.Fail(BadRequest(fmt::format("only one structured output may be asked for; got '{}' and '{}'",
                                         c->constraint_field, field),
                             field));
  }
  c->constraint = std::move(spec);
  c->constraint_field = field;
}

void ReadResponseFormatField(const json& v, FieldReader& r, CommonRequest* c) {
  ConstraintSpec spec;
  bool constrained = false;
  if (auto e = ReadResponseFormat(v, &spec, &constrained)) return r.Fail(*e);
  if (constrained) Give("response_format", std::move(spec), r, c);
}

void ReadStructuredOutputs(const json& so, FieldReader& r, CommonRequest* c) {
  if (!so.is_object()) return r.Fail(BadRequest("'structured_outputs' must be an object", "structured_outputs"));
  for (const auto& [key, value] : so.items()) {
    if (value.is_null()) continue;
    if (key != "json" && key != "regex" && key != "choice" && key != "grammar" && key != "json_object") {
      // whitespace_pattern, structural_tag and the like: refused rather than ignored.
      return r.Fail(BadRequest(fmt::format("'structured_outputs.{}' is not supported", SafeText(key, 64)),
                               "structured_outputs"));
    }
    if (key == "json_object" && value == false) continue;
    ConstraintSpec spec;
    if (auto e = ReadKey(key, value, "structured_outputs." + key, &spec)) return r.Fail(*e);
    Give("structured_outputs." + key, std::move(spec), r, c);
  }
}

template <const char* kKey>
void ReadGuided(const json& v, FieldReader& r, CommonRequest* c) {
  const std::string field = std::string("guided_") + kKey;
  ConstraintSpec spec;
  if (auto e = ReadKey(kKey, v, field, &spec)) return r.Fail(*e);
  Give(field, std::move(spec), r, c);
}

constexpr char kJson[] = "json", kRegex[] = "regex", kChoice[] = "choice", kGrammar[] = "grammar";

// A JSON schema, as ReadKey's SchemaText takes it (its JSON text in a string is accepted too).
json SchemaSchema() { return {{"type", {"object", "boolean"}}}; }
json PatternSchema() { return {{"type", "string"}, {"minLength", 1}}; }
json ChoiceSchema() { return {{"type", "array"}, {"minItems", 1}, {"items", {{"type", "string"}}}}; }

json ResponseFormatSchema() {
  return {{"oneOf",
           json::array(
               {{{"type", "object"},
                 {"properties", {{"type", {{"enum", {"text", "json_object"}}}}}},
                 {"required", {"type"}}},
                {{"type", "object"},
                 {"properties",
                  {{"type", {{"const", "json_schema"}}},
                   {"json_schema",
                    {{"type", "object"},
                     {"properties", {{"name", {{"type", "string"}}}, {"schema", SchemaSchema()}}},
                     {"required", {"schema"}}}}}},
                 {"required", {"type", "json_schema"}}}})}};
}

json StructuredOutputsSchema() {
  auto nullable = [](json s) { return json{{"anyOf", json::array({std::move(s), {{"type", "null"}}})}}; };
  return {{"type", "object"},
          {"properties",
           {{"json", nullable(SchemaSchema())},
            {"regex", nullable(PatternSchema())},
            {"choice", nullable(ChoiceSchema())},
            {"grammar", nullable(PatternSchema())},
            {"json_object", {{"type", {"boolean", "null"}}}}}},
          {"additionalProperties", {{"type", "null"}}}};
}

}  // namespace

const std::vector<Field<CommonRequest>>& StructuredOutputFields() {
  static const std::vector<Field<CommonRequest>> fields = {
      {"response_format", CustomField<CommonRequest>{ReadResponseFormatField, ResponseFormatSchema},
       "OpenAI's: text, json_object, or json_schema with a schema the output follows"},
      {"structured_outputs", CustomField<CommonRequest>{ReadStructuredOutputs, StructuredOutputsSchema},
       "vLLM's: one of json (a schema), regex, choice, grammar (Lark/EBNF) or json_object"},
      {"guided_json", CustomField<CommonRequest>{ReadGuided<kJson>, SchemaSchema}, "vLLM's older name of structured_outputs.json"},
      {"guided_regex", CustomField<CommonRequest>{ReadGuided<kRegex>, PatternSchema}, "vLLM's older structured_outputs.regex"},
      {"guided_choice", CustomField<CommonRequest>{ReadGuided<kChoice>, ChoiceSchema}, "vLLM's older structured_outputs.choice"},
      {"guided_grammar", CustomField<CommonRequest>{ReadGuided<kGrammar>, PatternSchema},
       "vLLM's older structured_outputs.grammar"},
  };
  return fields;
}

}  // namespace ember::server
