// JSON in and out of template values: FromJson for the inputs, DumpJson for HF's tojson filter.
//
// HF replaces jinja2's HTML-escaping tojson with json.dumps(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False), so DumpJson reproduces Python's json encoder byte for byte:
// ", " and ": " separators (or "," and ": " when indenting), floats as repr(), NaN/Infinity, and
// only the escapes Python emits.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/pystr.h"
#include "tokenizer/jinja/value.h"

namespace ember::jinja {
namespace {

void AppendJsonString(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  char buf[16];
  for (char32_t c : py::Decode(s)) {
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    const bool escape = c < 0x20 || (ensure_ascii && c > 0x7E);
    if (!escape) {
      py::AppendUtf8(out, c);
    } else if (c < 0x10000) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      const char32_t v = c - 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                    static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      out += buf;
    }
  }
  out.push_back('"');
}

std::string JsonFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py::ReprFloat(d);
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonDumpOptions& options) : options_(options) {
    const bool indenting = options.indent.has_value();
    item_sep_ = options.separators ? options.separators->first : (indenting ? "," : ", ");
    key_sep_ = options.separators ? options.separators->second : ": ";
  }

  Status Write(const Value& v, int depth, std::string& out) {
    switch (v.kind()) {
      case Value::Kind::kNone: out += "null"; return Status::Ok();
      case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return Status::Ok();
      case Value::Kind::kInt: out += std::to_string(v.as_int()); return Status::Ok();
      case Value::Kind::kFloat: out += JsonFloat(v.as_double()); return Status::Ok();
      case Value::Kind::kString:
        AppendJsonString(out, v.as_string(), options_.ensure_ascii);
        return Status::Ok();
      case Value::Kind::kList:
      case Value::Kind::kTuple:
        return WriteList(v.items(), depth, out);
      case Value::Kind::kDict:
        return WriteDict(v.entries(), depth, out);
      default:
        return InvalidArgument("Object of type " + TypeName(v) + " is not JSON serializable");
    }
  }

 private:
  // Shared lists can make a small value print as gigabytes; see PrintCap.
  static Status CheckCap(const std::string& out) {
    if (!PastPrintCap(out)) return Status::Ok();
    return InvalidArgument("tojson output is larger than " + std::to_string(CurrentPrintCap().max_bytes) +
                           " bytes, the render's limit");
  }

  void Newline(int depth, std::string& out) const {
    if (!options_.indent) return;
    out.push_back('\n');
    for (int i = 0; i < depth && !PastPrintCap(out); ++i) out += *options_.indent;
  }

  Status WriteList(const Value::Items& items, int depth, std::string& out) {
    if (items.empty()) {
      out += "[]";
      return Status::Ok();
    }
    out.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      EMBER_RETURN_IF_ERROR(CheckCap(out));
      if (i > 0) out += item_sep_;
      Newline(depth + 1, out);
      EMBER_RETURN_IF_ERROR(Write(items[i], depth + 1, out));
    }
    Newline(depth, out);
    EMBER_RETURN_IF_ERROR(CheckCap(out));
    out.push_back(']');
    return Status::Ok();
  }

  // Python converts keys to strings: str as is, numbers by repr, True/False/None as JSON words.
  static Expected<std::string> KeyString(const Value& key) {
    switch (key.kind()) {
      case Value::Kind::kString: return key.as_string();
      case Value::Kind::kInt: return std::to_string(key.as_int());
      case Value::Kind::kFloat: return JsonFloat(key.as_double());
      case Value::Kind::kBool: return std::string(key.as_bool() ? "true" : "false");
      case Value::Kind::kNone: return std::string("null");
      default:
        return InvalidArgument("keys must be str, int, float, bool or None, not " + TypeName(key));
    }
  }

  Status WriteDict(const Value::Entries& entries, int depth, std::string& out) {
    if (entries.empty()) {
      out += "{}";
      return Status::Ok();
    }
    std::vector<const std::pair<Value, Value>*> order;
    for (const auto& entry : entries) order.push_back(&entry);
    if (options_.sort_keys) {
      Status failure;
      std::stable_sort(order.begin(), order.end(), [&failure](const auto* a, const auto* b) {
        auto c = Compare(a->first, b->first);
        if (!c.ok()) {
          failure = c.status();
          return false;
        }
        return *c < 0;
      });
      EMBER_RETURN_IF_ERROR(failure);
    }
    out.push_back('{');
    for (size_t i = 0; i < order.size(); ++i) {
      EMBER_RETURN_IF_ERROR(CheckCap(out));
      if (i > 0) out += item_sep_;
      Newline(depth + 1, out);
      EMBER_ASSIGN_OR_RETURN(std::string key, KeyString(order[i]->first));
      AppendJsonString(out, key, options_.ensure_ascii);
      out += key_sep_;
      EMBER_RETURN_IF_ERROR(Write(order[i]->second, depth + 1, out));
    }
    Newline(depth, out);
    EMBER_RETURN_IF_ERROR(CheckCap(out));
    out.push_back('}');
    return Status::Ok();
  }

  const JsonDumpOptions& options_;
  std::string item_sep_;
  std::string key_sep_;
};

}  // namespace

Value FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value::Int(static_cast<int64_t>(u));
      return Value::Float(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::Str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Value::Items items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(FromJson(item));
      return Value::List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value::Entries entries;
      entries.reserve(j.size());
      for (const auto& [key, item] : j.items()) entries.emplace_back(Value::Str(key), FromJson(item));
      return Value::Dict(std::move(entries));
    }
    default:
      return Value::Undefined("unsupported JSON value");
  }
}

Expected<std::string> DumpJson(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  JsonWriter writer(options);
  EMBER_RETURN_IF_ERROR(writer.Write(v, 0, out));
  return out;
}

}  // namespace ember::jinja
