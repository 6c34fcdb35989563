// Typed, optional fields of a JSON request body. The first wrong type or range is remembered as an
// ApiError naming the field, so parsers read every field straight through and check once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/protocol/api_error.h"

namespace ember::server {

class FieldReader {
 public:
  explicit FieldReader(const nlohmann::ordered_json& body) : body_(body) {}

  bool Has(std::string_view key) const;  // present and not null
  // Each leaves *out untouched when the field is absent or null.
  void Bool(std::string_view key, bool* out);
  void Int(std::string_view key, int32_t* out);
  void Int(std::string_view key, std::optional<int32_t>* out);
  void Uint64(std::string_view key, std::optional<uint64_t>* out);
  void Float(std::string_view key, float* out);
  void Double(std::string_view key, std::optional<double>* out);  // finite
  void String(std::string_view key, std::string* out);
  // A string or an array of strings (OpenAI's `stop`).
  void StringOrStrings(std::string_view key, std::vector<std::string>* out);
  void IntArray(std::string_view key, std::vector<int32_t>* out);

  // Records `error` unless an earlier one is already recorded.
  void Fail(ApiError error);
  const std::optional<ApiError>& error() const { return error_; }

 private:
  const nlohmann::ordered_json* Get(std::string_view key);
  void TypeError(std::string_view key, std::string_view expected);

  const nlohmann::ordered_json& body_;
  std::optional<ApiError> error_;
};

}  // namespace ember::server
