// Reading a JSON object field by field with clear errors: wrong types, missing required
// fields and fields nobody asked for are reported with their JSON path ("text_config.hidden_size").
#pragma once

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace ember {

class JsonFields {
 public:
  // `where` names the document in errors, e.g. "config.json" or "config.json: text_config".
  JsonFields(const nlohmann::json& object, std::string where);

  Status Int(const char* key, int64_t* out, bool required = true);
  Status Double(const char* key, double* out, bool required = true);
  Status Bool(const char* key, bool* out, bool required = true);
  Status String(const char* key, std::string* out, bool required = true);
  Status StringList(const char* key, std::vector<std::string>* out, bool required = true);
  Status DoubleList(const char* key, std::vector<double>* out, bool required = true);
  // An int or a list of ints (eos_token_id is either).
  Status IntOrIntList(const char* key, std::vector<int64_t>* out, bool required = true);
  // The raw sub-object, or nullptr if absent (for nested configs).
  const nlohmann::json* Object(const char* key);
  // Marks keys as known but irrelevant to inference (e.g. "initializer_range").
  void Ignore(std::initializer_list<const char*> keys);
  bool Has(const char* key) const { return object_.contains(key) && !object_.at(key).is_null(); }

  // InvalidArgument listing every key that was neither read nor ignored.
  Status RejectUnknown() const;

 private:
  const nlohmann::json* Find(const char* key, bool required, Status* status);
  Status TypeError(const char* key, const char* expected) const;

  const nlohmann::json& object_;
  std::string where_;
  std::set<std::string> seen_;
};

}  // namespace ember
