#include "server/protocol/request_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "server/protocol/safe_text.h"

namespace ember::server {

using json = nlohmann::ordered_json;

namespace {

constexpr double kInt32Min = std::numeric_limits<int32_t>::min();
constexpr double kInt32Max = std::numeric_limits<int32_t>::max();

bool InRange(const Limits& l, double v) {
  if (l.min && (l.exclusive_min ? !(v > *l.min) : !(v >= *l.min))) return false;
  if (l.max && !(v <= *l.max)) return false;
  return true;
}

// "in [0, 2]", "in (0, 1]", "at least 1", "greater than 0", "at most 5".
std::string RangeText(const Limits& l) {
  if (l.min && l.max) return fmt::format("in {}{}, {}]", l.exclusive_min ? "(" : "[", *l.min, *l.max);
  if (l.min) return fmt::format("{} {}", l.exclusive_min ? "greater than" : "at least", *l.min);
  return fmt::format("at most {}", l.max.value_or(0));
}

void CheckNumber(FieldReader& r, const std::string& name, const Limits& l, double v) {
  if (!InRange(l, v)) r.Fail(BadRequest(fmt::format("'{}' must be {}, got {}", name, RangeText(l), v), name));
}

size_t CodePoints(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// Checks one string against the limits; false (and the error recorded) when it fails.
bool CheckString(FieldReader& r, const std::string& name, const Limits& l, const std::string& v) {
  const size_t n = CodePoints(v);
  if (n < l.min_length) {
    r.Fail(BadRequest(l.min_length == 1 ? fmt::format("'{}' must not be empty", name)
                                        : fmt::format("'{}' must be at least {} characters", name, l.min_length),
                      name));
    return false;
  }
  if (l.max_length > 0 && n > l.max_length) {
    r.Fail(BadRequest(fmt::format("'{}' must be at most {} characters", name, l.max_length), name));
    return false;
  }
  if (!l.one_of.empty() && std::find(l.one_of.begin(), l.one_of.end(), v) == l.one_of.end()) {
    r.Fail(BadRequest(fmt::format("'{}' must be one of {}, got '{}'", name, fmt::join(l.one_of, ", "), SafeText(v, 64)),
                      name));
    return false;
  }
  return true;
}

bool CheckItems(FieldReader& r, const std::string& name, const Limits& l, size_t count) {
  if (l.max_items > 0 && count > l.max_items) {
    r.Fail(BadRequest(fmt::format("'{}' may have at most {} items, got {}", name, l.max_items, count), name));
    return false;
  }
  return true;
}

// {"minimum": ..., "maximum": ...} of the limits within the type's own range [lo, hi].
void AddBounds(const Limits& l, double lo, double hi, json* s) {
  const double min = l.min ? std::max(*l.min, lo) : lo;
  const double max = l.max ? std::min(*l.max, hi) : hi;
  const bool integer = (*s)["type"] == "integer";
  auto number = [integer](double v) { return integer ? json(static_cast<int64_t>(v)) : json(v); };
  (*s)[l.min && l.exclusive_min ? "exclusiveMinimum" : "minimum"] = number(min);
  (*s)["maximum"] = number(max);
}

json StringSchema(const Limits& l) {
  json s = {{"type", "string"}};
  if (l.min_length > 0) s["minLength"] = l.min_length;
  if (l.max_length > 0) s["maxLength"] = l.max_length;
  if (!l.one_of.empty()) s["enum"] = l.one_of;
  return s;
}

json Int32Schema(const Limits& l) {
  json s = {{"type", "integer"}};
  AddBounds(l, kInt32Min, kInt32Max, &s);
  return s;
}

json WithDefault(json s, json default_value) {
  if (!default_value.is_null()) s["default"] = std::move(default_value);
  return s;
}

}  // namespace

void ReadValue(FieldReader& r, const std::string& name, const Limits&, bool* value) { r.Bool(name, value); }

void ReadValue(FieldReader& r, const std::string& name, const Limits& limits, std::optional<int32_t>* value) {
  std::optional<int32_t> read;
  const bool clean = !r.error();
  r.Int(name, &read);
  if (!read || !clean || r.error()) return;
  CheckNumber(r, name, limits, *read);
  if (!r.error()) *value = read;
}

void ReadValue(FieldReader& r, const std::string& name, const Limits& limits, int32_t* value) {
  std::optional<int32_t> read;
  ReadValue(r, name, limits, &read);
  if (read) *value = *read;
}

void ReadValue(FieldReader& r, const std::string& name, const Limits&, std::optional<uint64_t>* value) {
  r.Uint64(name, value);
}

void ReadValue(FieldReader& r, const std::string& name, const Limits& limits, float* value) {
  std::optional<double> read;
  const bool clean = !r.error();
  r.Double(name, &read);
  if (!read || !clean || r.error()) return;
  // The range is checked on the number as sent; a float must hold it.
  Limits bounded = limits;
  if (!bounded.min) bounded.min = -FLT_MAX;
  if (!bounded.max) bounded.max = FLT_MAX;
  CheckNumber(r, name, bounded, *read);
  if (!r.error()) *value = static_cast<float>(*read);
}

void ReadValue(FieldReader& r, const std::string& name, const Limits& limits, std::string* value) {
  std::string read;
  const bool clean = !r.error();
  r.String(name, &read);
  if (!clean || r.error() || !CheckString(r, name, limits, read)) return;
  *value = std::move(read);
}

void ReadValue(FieldReader& r, const std::string& name, const Limits& limits, std::vector<std::string>* value) {
  std::vector<std::string> read;
  const bool clean = !r.error();
  r.StringOrStrings(name, &read);
  if (!clean || r.error() || !CheckItems(r, name, limits, read.size())) return;
  for (const std::string& s : read) {
    if (!CheckString(r, name, limits, s)) return;
  }
  *value = std::move(read);
}

void ReadValue(FieldReader& r, const std::string& name, const Limits& limits, std::vector<int32_t>* value) {
  std::vector<int32_t> read;
  const bool clean = !r.error();
  r.IntArray(name, &read);
  if (!clean || r.error() || !CheckItems(r, name, limits, read.size())) return;
  for (int32_t id : read) {
    CheckNumber(r, name, limits, id);
    if (r.error()) return;
  }
  *value = std::move(read);
}

json ValueSchema(const Limits&, bool default_value) { return {{"type", "boolean"}, {"default", default_value}}; }

json ValueSchema(const Limits& limits, int32_t default_value) {
  return WithDefault(Int32Schema(limits), default_value);
}

json ValueSchema(const Limits& limits, const std::optional<int32_t>& default_value) {
  return WithDefault(Int32Schema(limits), default_value ? json(*default_value) : json());
}

json ValueSchema(const Limits&, const std::optional<uint64_t>& default_value) {
  // FieldReader::Uint64: any whole number that fits an int64 (negative ones by their bits) or a uint64.
  json s = {{"type", "integer"},
            {"minimum", std::numeric_limits<int64_t>::min()},
            {"maximum", std::numeric_limits<uint64_t>::max()}};
  return WithDefault(std::move(s), default_value ? json(*default_value) : json());
}

json ValueSchema(const Limits& limits, float default_value) {
  json s = {{"type", "number"}};
  AddBounds(limits, -FLT_MAX, FLT_MAX, &s);
  return WithDefault(std::move(s), static_cast<double>(default_value));
}

json ValueSchema(const Limits& limits, const std::string& default_value) {
  return WithDefault(StringSchema(limits), default_value.empty() ? json() : json(default_value));
}

json ValueSchema(const Limits& limits, const std::vector<std::string>& default_value) {
  json array = {{"type", "array"}, {"items", StringSchema(limits)}};
  if (limits.max_items > 0) array["maxItems"] = limits.max_items;
  json s = {{"anyOf", json::array({StringSchema(limits), array})}};
  return WithDefault(std::move(s), default_value.empty() ? json() : json(default_value));
}

json ValueSchema(const Limits& limits, const std::vector<int32_t>& default_value) {
  json s = {{"type", "array"}, {"items", Int32Schema(limits)}};
  if (limits.max_items > 0) s["maxItems"] = limits.max_items;
  return WithDefault(std::move(s), default_value.empty() ? json() : json(default_value));
}

void RequireField(FieldReader& r, const std::string& name) {
  r.Fail(BadRequest(fmt::format("'{}' is required", name), name));
}

namespace {
// Present and neither null nor false.
bool Given(const json& body, const std::string& name) {
  const auto it = body.find(name);
  return it != body.end() && !it->is_null() && *it != false;
}
}  // namespace

void CheckOnlyWhen(const json& body, FieldReader& r, const std::string& name,
                   const std::pair<std::string, bool>& only_when) {
  if (!Given(body, name)) return;
  const auto it = body.find(only_when.first);
  if (it != body.end() && *it == only_when.second) return;
  r.Fail(BadRequest(fmt::format("'{}' is only allowed when '{}' is {}", name, only_when.first, only_when.second),
                    name));
}

json OnlyWhenSchema(const std::string& name, const std::pair<std::string, bool>& only_when) {
  json given = {{"required", json::array({name})},
                {"properties", {{name, {{"not", {{"enum", json::array({nullptr, false})}}}}}}}};
  json then = {{"required", json::array({only_when.first})},
               {"properties", {{only_when.first, {{"const", only_when.second}}}}}};
  return {{"if", std::move(given)}, {"then", std::move(then)}};
}

json DescribeField(json schema, const std::string& description, bool required) {
  if (!required) {
    if (schema.contains("type") && schema["type"].is_string()) {
      if (schema["type"] != "null") schema["type"] = json::array({schema["type"], "null"});
      if (schema.contains("enum")) schema["enum"].push_back(nullptr);
    } else if (schema.contains("anyOf")) {
      schema["anyOf"].push_back({{"type", "null"}});
    } else if (!schema.empty()) {
      schema = {{"anyOf", json::array({std::move(schema), {{"type", "null"}}})}};
    }
  }
  if (!description.empty()) schema["description"] = description;
  return schema;
}

}  // namespace ember::server
