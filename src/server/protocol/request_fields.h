// Request fields as data. A table per request type names each field, the JSON it takes (the type
// of the member it lands in: bool, int32, uint64, float, string, a string or strings, token ids;
// `limits` for ranges, lengths and allowed strings), whether it is required and a one-line
// description; its default is the member's value before parsing. The parsers read a body through
// these tables (ReadFields) and the OpenAPI document is written from them (FieldsSchema), so a
// field the parser learns is in the document with the ranges the parser enforces. Fields whose
// JSON is an object or a union of shapes (messages, tools, response_format, ...) are a
// CustomField: their reader and their schema, side by side in the table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/protocol/field_reader.h"

namespace ember::server {

// What a value must be beyond its type. For arrays the bounds, lengths and allowed strings apply
// to each item and max_items to the array.
struct Limits {
  std::optional<double> min = std::nullopt, max = std::nullopt;
  bool exclusive_min = false;
  size_t min_length = 0;                 // strings, in characters
  size_t max_length = 0;                 // 0: no limit
  size_t max_items = 0;                  // 0: no limit
  std::vector<std::string> one_of = {};  // the allowed strings, when not empty
};

// A field the typed reads cannot express: `read` gets the value (present and not null), `schema`
// is its JSON Schema (without null, which every field allows: null reads as absent).
template <typename T>
struct CustomField {
  void (*read)(const nlohmann::ordered_json& value, FieldReader& r, T* out);
  nlohmann::ordered_json (*schema)();
};

template <typename T>
struct Field {
  using Member = std::variant<bool T::*, int32_t T::*, std::optional<int32_t> T::*, std::optional<uint64_t> T::*,
                              float T::*, std::string T::*, std::vector<std::string> T::*,
                              std::vector<int32_t> T::*, CustomField<T>>;
  std::string name;
  Member member;
  std::string description;
  Limits limits = {};
  bool required = false;
  // Allowed (present and neither null nor false) only when another field is sent with this value:
  // {"stream", true} for stream_options.
  std::optional<std::pair<std::string, bool>> only_when = std::nullopt;
};

// The typed reads: FieldReader's, then the limits. Each leaves *value untouched when the read fails.
void ReadValue(FieldReader& r, const std::string& name, const Limits& limits, bool* value);
void ReadValue(FieldReader& r, const std::string& name, const Limits& limits, int32_t* value);
void ReadValue(FieldReader& r, const std::string& name, const Limits& limits, std::optional<int32_t>* value);
void ReadValue(FieldReader& r, const std::string& name, const Limits& limits, std::optional<uint64_t>* value);
void ReadValue(FieldReader& r, const std::string& name, const Limits& limits, float* value);
void ReadValue(FieldReader& r, const std::string& name, const Limits& limits, std::string* value);
void ReadValue(FieldReader& r, const std::string& name, const Limits& limits, std::vector<std::string>* value);
void ReadValue(FieldReader& r, const std::string& name, const Limits& limits, std::vector<int32_t>* value);
// What those reads accept, as JSON Schema, with the default when there is one.
nlohmann::ordered_json ValueSchema(const Limits& limits, bool default_value);
nlohmann::ordered_json ValueSchema(const Limits& limits, int32_t default_value);
nlohmann::ordered_json ValueSchema(const Limits& limits, const std::optional<int32_t>& default_value);
nlohmann::ordered_json ValueSchema(const Limits& limits, const std::optional<uint64_t>& default_value);
nlohmann::ordered_json ValueSchema(const Limits& limits, float default_value);
nlohmann::ordered_json ValueSchema(const Limits& limits, const std::string& default_value);
nlohmann::ordered_json ValueSchema(const Limits& limits, const std::vector<std::string>& default_value);
nlohmann::ordered_json ValueSchema(const Limits& limits, const std::vector<int32_t>& default_value);
// Records "'name' is required".
void RequireField(FieldReader& r, const std::string& name);
// Checks and describes Field::only_when.
void CheckOnlyWhen(const nlohmann::ordered_json& body, FieldReader& r, const std::string& name,
                   const std::pair<std::string, bool>& only_when);
nlohmann::ordered_json OnlyWhenSchema(const std::string& name, const std::pair<std::string, bool>& only_when);
// Adds the description and, unless the field is required, null (read as absent).
nlohmann::ordered_json DescribeField(nlohmann::ordered_json schema, const std::string& description, bool required);

template <typename T>
void ReadFields(const nlohmann::ordered_json& body, FieldReader& r, const std::vector<Field<T>>& fields, T* out) {
  for (const Field<T>& f : fields) {
    if (!r.Has(f.name)) {
      if (f.required) RequireField(r, f.name);
      continue;
    }
    std::visit(
        [&](auto member) {
          if constexpr (std::is_same_v<decltype(member), CustomField<T>>) {
            member.read(body[f.name], r, out);
          } else {
            ReadValue(r, f.name, f.limits, &(out->*member));
          }
        },
        f.member);
    if (f.only_when) CheckOnlyWhen(body, r, f.name, *f.only_when);
  }
}

// Adds `fields` to an object schema ({"type": "object", "properties": ..., "required": ...}, made
// when *schema is null); defaults are the members of `defaults`, the target before parsing.
template <typename T>
void AddFieldsSchema(const std::vector<Field<T>>& fields, const T& defaults, nlohmann::ordered_json* schema) {
  if (schema->is_null()) *schema = {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}};
  for (const Field<T>& f : fields) {
    nlohmann::ordered_json value = std::visit(
        [&](auto member) {
          if constexpr (std::is_same_v<decltype(member), CustomField<T>>) {
            return member.schema();
          } else {
            return ValueSchema(f.limits, defaults.*member);
          }
        },
        f.member);
    (*schema)["properties"][f.name] = DescribeField(std::move(value), f.description, f.required);
    if (f.required) (*schema)["required"].push_back(f.name);
    if (f.only_when) (*schema)["allOf"].push_back(OnlyWhenSchema(f.name, *f.only_when));
  }
}

}  // namespace ember::server
