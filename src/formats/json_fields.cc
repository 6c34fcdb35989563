#include "formats/json_fields.h"

#include <fmt/format.h>

namespace ember {

JsonFields::JsonFields(const nlohmann::json& object, std::string where)
    : object_(object), where_(std::move(where)) {}

const nlohmann::json* JsonFields::Find(const char* key, bool required, Status* status) {
  seen_.insert(key);
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) {
    if (required) *status = InvalidArgument(fmt::format("{}: required field '{}' is missing", where_, key));
    return nullptr;
  }
  return &*it;
}

Status JsonFields::TypeError(const char* key, const char* expected) const {
  return InvalidArgument(fmt::format("{}: field '{}' must be {}, got {}", where_, key, expected,
                                     object_.at(key).dump()));
}

Status JsonFields::Int(const char* key, int64_t* out, bool required) {
  Status status;
  const nlohmann::json* v = Find(key, required, &status);
  if (v == nullptr) return status;
  if (!v->is_number_integer()) return TypeError(key, "an integer");
  *out = v->get<int64_t>();
  return Status::Ok();
}

Status JsonFields::Double(const char* key, double* out, bool required) {
  Status status;
  const nlohmann::json* v = Find(key, required, &status);
  if (v == nullptr) return status;
  if (!v->is_number()) return TypeError(key, "a number");
  *out = v->get<double>();
  return Status::Ok();
}

Status JsonFields::Bool(const char* key, bool* out, bool required) {
  Status status;
  const nlohmann::json* v = Find(key, required, &status);
  if (v == nullptr) return status;
  if (!v->is_boolean()) return TypeError(key, "true or false");
  *out = v->get<bool>();
  return Status::Ok();
}

Status JsonFields::String(const char* key, std::string* out, bool required) {
  Status status;
  const nlohmann::json* v = Find(key, required, &status);
  if (v == nullptr) return status;
  if (!v->is_string()) return TypeError(key, "a string");
  *out = v->get<std::string>();
  return Status::Ok();
}

Status JsonFields::StringList(const char* key, std::vector<std::string>* out, bool required) {
  Status status;
  const nlohmann::json* v = Find(key, required, &status);
  if (v == nullptr) return status;
  if (!v->is_array()) return TypeError(key, "a list of strings");
  out->clear();
  for (const auto& item : *v) {
    if (!item.is_string()) return TypeError(key, "a list of strings");
    out->push_back(item.get<std::string>());
  }
  return Status::Ok();
}

Status JsonFields::DoubleList(const char* key, std::vector<double>* out, bool required) {
  Status status;
  const nlohmann::json* v = Find(key, required, &status);
  if (v == nullptr) return status;
  if (!v->is_array()) return TypeError(key, "a list of numbers");
  out->clear();
  for (const auto& item : *v) {
    if (!item.is_number()) return TypeError(key, "a list of numbers");
    out->push_back(item.get<double>());
  }
  return Status::Ok();
}

Status JsonFields::IntOrIntList(const char* key, std::vector<int64_t>* out, bool required) {
  Status status;
  const nlohmann::json* v = Find(key, required, &status);
  if (v == nullptr) return status;
  out->clear();
  if (v->is_number_integer()) {
    out->push_back(v->get<int64_t>());
    return Status::Ok();
  }
  if (!v->is_array()) return TypeError(key, "an integer or a list of integers");
  for (const auto& item : *v) {
    if (!item.is_number_integer()) return TypeError(key, "an integer or a list of integers");
    out->push_back(item.get<int64_t>());
  }
  return Status::Ok();
}

const nlohmann::json* JsonFields::Object(const char* key) {
  seen_.insert(key);
  auto it = object_.find(key);
  if (it == object_.end() || !it->is_object()) return nullptr;
  return &*it;
}

void JsonFields::Ignore(std::initializer_list<const char*> keys) {
  for (const char* key : keys) seen_.insert(key);
}

Status JsonFields::RejectUnknown() const {
  std::string unknown;
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (seen_.count(it.key()) == 0) unknown += (unknown.empty() ? "'" : ", '") + it.key() + "'";
  }
  if (unknown.empty()) return Status::Ok();
  return InvalidArgument(fmt::format(
      "{}: unknown field(s) {}. ember does not know how they change the model, so it refuses to guess; "
      "if the checkpoint is newer than this ember, upgrade ember",
      where_, unknown));
}

}  // namespace ember
