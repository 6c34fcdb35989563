#include "server/protocol/field_reader.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace ember::server {

bool FieldReader::Has(std::string_view key) const {
  auto it = body_.find(key);
  return it != body_.end() && !it->is_null();
}

const nlohmann::ordered_json* FieldReader::Get(std::string_view key) {
  auto it = body_.find(key);
  if (it == body_.end() || it->is_null()) return nullptr;
  return &*it;
}

void FieldReader::Fail(ApiError error) {
  if (!error_) error_ = std::move(error);
}

void FieldReader::TypeError(std::string_view key, std::string_view expected) {
  Fail(BadRequest(fmt::format("'{}' must be {}", key, expected), std::string(key)));
}

void FieldReader::Bool(std::string_view key, bool* out) {
  const nlohmann::ordered_json* v = Get(key);
  if (v == nullptr) return;
  if (!v->is_boolean()) return TypeError(key, "a boolean");
  *out = v->get<bool>();
}

namespace {
// JSON numbers that are whole and fit in [lo, hi]; 3.0 counts as an integer, 3.5 does not.
std::optional<int64_t> WholeNumber(const nlohmann::ordered_json& v, double lo, double hi) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (static_cast<double>(u) > hi) return std::nullopt;
      return static_cast<int64_t>(u);
    }
    const int64_t i = v.get<int64_t>();
    if (static_cast<double>(i) < lo || static_cast<double>(i) > hi) return std::nullopt;
    return i;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < lo || d > hi) return std::nullopt;
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}
}  // namespace

void FieldReader::Int(std::string_view key, int32_t* out) {
  std::optional<int32_t> value;
  Int(key, &value);
  if (value) *out = *value;
}

void FieldReader::Int(std::string_view key, std::optional<int32_t>* out) {
  const nlohmann::ordered_json* v = Get(key);
  if (v == nullptr) return;
  const auto n = WholeNumber(*v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  if (!n) return TypeError(key, "a 32-bit integer");
  *out = static_cast<int32_t>(*n);
}

void FieldReader::Uint64(std::string_view key, std::optional<uint64_t>* out) {
  const nlohmann::ordered_json* v = Get(key);
  if (v == nullptr) return;
  if (v->is_number_unsigned()) {
    *out = v->get<uint64_t>();
    return;
  }
  // Negative seeds are accepted as vLLM does, by their two's-complement bits.
  if (v->is_number_integer()) {
    *out = static_cast<uint64_t>(v->get<int64_t>());
    return;
  }
  // A whole number written with a fraction or an exponent (3.0, 1e3) is an integer too, as JSON
  // Schema says, when it fits: [-2^63, 2^64).
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d >= -0x1p63 && d < 0x1p64) {
      *out = d < 0 ? static_cast<uint64_t>(static_cast<int64_t>(d)) : static_cast<uint64_t>(d);
      return;
    }
  }
  TypeError(key, "an integer");
}

void FieldReader::Float(std::string_view key, float* out) {
  const nlohmann::ordered_json* v = Get(key);
  if (v == nullptr) return;
  if (!v->is_number()) return TypeError(key, "a number");
  const double d = v->get<double>();
  if (!std::isfinite(d)) return TypeError(key, "a finite number");
  *out = static_cast<float>(d);
}

void FieldReader::Double(std::string_view key, std::optional<double>* out) {
  const nlohmann::ordered_json* v = Get(key);
  if (v == nullptr) return;
  if (!v->is_number()) return TypeError(key, "a number");
  const double d = v->get<double>();
  if (!std::isfinite(d)) return TypeError(key, "a finite number");
  *out = d;
}

void FieldReader::String(std::string_view key, std::string* out) {
  const nlohmann::ordered_json* v = Get(key);
  if (v == nullptr) return;
  if (!v->is_string()) return TypeError(key, "a string");
  *out = v->get<std::string>();
}

void FieldReader::StringOrStrings(std::string_view key, std::vector<std::string>* out) {
  const nlohmann::ordered_json* v = Get(key);
  if (v == nullptr) return;
  if (v->is_string()) {
    *out = {v->get<std::string>()};
    return;
  }
  if (!v->is_array()) return TypeError(key, "a string or an array of strings");
  out->clear();
  for (const nlohmann::ordered_json& item : *v) {
    if (!item.is_string()) return TypeError(key, "a string or an array of strings");
    out->push_back(item.get<std::string>());
  }
}

void FieldReader::IntArray(std::string_view key, std::vector<int32_t>* out) {
  const nlohmann::ordered_json* v = Get(key);
  if (v == nullptr) return;
  if (!v->is_array()) return TypeError(key, "an array of integers");
  out->clear();
  for (const nlohmann::ordered_json& item : *v) {
    const auto n = WholeNumber(item, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
    if (!n) return TypeError(key, "an array of integers");
    out->push_back(static_cast<int32_t>(*n));
  }
}

}  // namespace ember::server
