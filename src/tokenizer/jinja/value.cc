#include "tokenizer/jinja/value.h"

#include <algorithm>
#include <cmath>

#include "tokenizer/jinja/pystr.h"

namespace ember::jinja {

const Value* ObjectData::Find(std::string_view name) const {
  for (const auto& [key, value] : attrs) {
    if (key == name) return &value;
  }
  return nullptr;
}

void ObjectData::Set(const std::string& name, Value value) {
  for (auto& [key, existing] : attrs) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  attrs.emplace_back(name, std::move(value));
}

Value Value::Undefined(std::string hint) {
  Value v;
  v.data_ = std::move(hint);
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.data_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.data_ = i;
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.data_ = d;
  return v;
}

Value Value::Str(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.data_ = std::move(s);
  return v;
}

namespace {

uint16_t ContainerDepth(int deepest_element) {
  return static_cast<uint16_t>(std::min(deepest_element + 1, 65535));
}

}  // namespace

Value Value::List(Items items) {
  Value v;
  v.kind_ = Kind::kList;
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, static_cast<int>(item.depth_));
  v.depth_ = ContainerDepth(deepest);
  v.data_ = std::make_shared<const Items>(std::move(items));
  return v;
}

Value Value::Tuple(Items items) {
  Value v = List(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

Value Value::Iterator(Items items) {
  Value v = List(std::move(items));
  v.kind_ = Kind::kIterator;
  return v;
}

Value Value::Dict(Entries entries) {
  Entries unique;
  unique.reserve(entries.size());
  for (auto& [key, value] : entries) {
    bool replaced = false;
    for (auto& [existing_key, existing_value] : unique) {
      if (Equals(existing_key, key)) {
        existing_value = std::move(value);
        replaced = true;
        break;
      }
    }
    if (!replaced) unique.emplace_back(std::move(key), std::move(value));
  }
  Value v;
  v.kind_ = Kind::kDict;
  int deepest = 0;
  for (const auto& [key, value] : unique) deepest = std::max({deepest, static_cast<int>(key.depth_), static_cast<int>(value.depth_)});
  v.depth_ = ContainerDepth(deepest);
  v.data_ = std::make_shared<const Entries>(std::move(unique));
  return v;
}

Value Value::Object(std::shared_ptr<ObjectData> object) {
  Value v;
  v.kind_ = Kind::kObject;
  v.data_ = std::move(object);
  return v;
}

Value Value::Func(std::shared_ptr<const Function> fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.data_ = std::move(fn);
  return v;
}

double Value::as_double() const {
  if (kind_ == Kind::kFloat) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

const void* Value::identity() const {
  switch (kind_) {
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kIterator:
      return &items();
    case Kind::kDict:
      return &entries();
    case Kind::kObject:
      return &object();
    case Kind::kFunction:
      return &function();
    default:
      return nullptr;
  }
}

const Value* Value::FindKey(const Value& key) const {
  if (key.is_string()) return FindKey(std::string_view(key.as_string()));
  for (const auto& [k, v] : entries()) {
    if (Equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* Value::FindKey(std::string_view key) const {
  for (const auto& [k, v] : entries()) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_double() != 0.0;
    case Value::Kind::kString:
      return !v.as_string().empty();
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return !v.items().empty();
    case Value::Kind::kDict:
      return !v.entries().empty();
    case Value::Kind::kIterator:
    case Value::Kind::kObject:
    case Value::Kind::kFunction:
      return true;
  }
  return false;
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const auto& x = a.items();
      const auto& y = b.items();
      // Python compares items by identity first too ([nan] == [nan]); shared lists (x * n) then
      // compare in time linear in their text, not in what they would print as.
      if (&x == &y) return true;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (&a.entries() == &b.entries()) return true;
      if (a.entries().size() != b.entries().size()) return false;
      for (const auto& [key, value] : a.entries()) {
        const Value* other = b.FindKey(key);
        if (other == nullptr || !Equals(value, *other)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

Expected<int> Compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) {
      return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
    }
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    // Byte order of UTF-8 is code-point order, which is how Python compares str.
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.kind() == b.kind() && (a.kind() == Value::Kind::kList || a.kind() == Value::Kind::kTuple)) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equals(x[i], y[i])) return Compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  if (a.is_undefined()) return InvalidArgument(a.undefined_hint());
  if (b.is_undefined()) return InvalidArgument(b.undefined_hint());
  return InvalidArgument("'<' not supported between instances of '" + TypeName(a) + "' and '" +
                         TypeName(b) + "'");
}

bool Hashable(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
    case Value::Kind::kDict:
      return false;
    case Value::Kind::kTuple:
      for (const Value& item : v.items()) {
        if (!Hashable(item)) return false;
      }
      return true;
    default:
      return true;
  }
}

std::string TypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: return "list";
    case Value::Kind::kTuple: return "tuple";
    case Value::Kind::kIterator: return "generator";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kObject: return v.object().type_name;
    case Value::Kind::kFunction: return "function";
  }
  return "object";
}

std::string QuotedTypeName(const Value& v) {
  std::string out = "'";
  out += TypeName(v);
  out += "'";
  return out;
}

std::string ToStr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kString: return v.as_string();
    default: return Repr(v);
  }
}

int64_t ShallowBytes(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(v.as_string().size());
  int64_t bytes = 0;
  auto add = [&bytes](const Value& item) {
    bytes += sizeof(Value) + (item.is_string() ? static_cast<int64_t>(item.as_string().size()) : 0);
  };
  if (v.is_sequence()) {
    for (const Value& item : v.items()) add(item);
  } else if (v.is_dict()) {
    for (const auto& [key, value] : v.entries()) add(key), add(value);
  }
  return bytes;
}

PrintCap& CurrentPrintCap() {
  thread_local PrintCap cap;
  return cap;
}

std::string Repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.as_int());
    case Value::Kind::kFloat: return py::ReprFloat(v.as_double());
    case Value::Kind::kString: return py::ReprString(v.as_string());
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const bool tuple = v.kind() == Value::Kind::kTuple;
      std::string out = tuple ? "(" : "[";
      const auto& items = v.items();
      for (size_t i = 0; i < items.size() && !PastPrintCap(out); ++i) {
        if (i > 0) out += ", ";
        out += Repr(items[i]);
      }
      if (tuple && items.size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Value::Kind::kIterator: return "<generator object>";
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, value] : v.entries()) {
        if (PastPrintCap(out)) break;
        if (!first) out += ", ";
        first = false;
        out += Repr(key) + ": " + Repr(value);
      }
      return out + "}";
    }
    case Value::Kind::kObject: {
      const ObjectData& o = v.object();
      if (!o.assignable) return "<" + o.type_name + ">";
      // Namespaces can contain themselves; like Python's reprlib guard, a namespace already being
      // printed shows as {...}. Chains of namespaces deeper than a list could be are cut off too.
      thread_local std::vector<const ObjectData*> printing;
      if (std::find(printing.begin(), printing.end(), &o) != printing.end() || printing.size() >= kMaxValueDepth) {
        return "<" + o.type_name + " {...}>";
      }
      printing.push_back(&o);
      std::string out = "<" + o.type_name + " {";
      for (size_t i = 0; i < o.attrs.size() && !PastPrintCap(out); ++i) {
        if (i > 0) out += ", ";
        out += py::ReprString(o.attrs[i].first) + ": " + Repr(o.attrs[i].second);
      }
      printing.pop_back();
      return out + "}>";
    }
    case Value::Kind::kFunction: {
      std::string out = "<";
      out += v.function().Name();
      return out + ">";
    }
  }
  return "";
}

Expected<Value::Items> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return Value::Items{};
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kIterator:
      CurrentPrintCap().copied_bytes += ShallowBytes(v);
      return v.items();
    case Value::Kind::kDict: {
      CurrentPrintCap().copied_bytes += ShallowBytes(v);
      Value::Items keys;
      keys.reserve(v.entries().size());
      for (const auto& entry : v.entries()) keys.push_back(entry.first);
      return keys;
    }
    case Value::Kind::kString: {
      CurrentPrintCap().copied_bytes += static_cast<int64_t>(v.as_string().size() * (sizeof(Value) + 1));
      Value::Items chars;
      for (char32_t c : py::Decode(v.as_string())) {
        std::string s;
        py::AppendUtf8(s, c);
        chars.push_back(Value::Str(std::move(s)));
      }
      return chars;
    }
    default:
      return InvalidArgument(QuotedTypeName(v) + " object is not iterable");
  }
}

Expected<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return int64_t{0};
    case Value::Kind::kString:
      return py::Length(v.as_string());
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return static_cast<int64_t>(v.items().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.entries().size());
    default:
      return InvalidArgument("object of type '" + TypeName(v) + "' has no len()");
  }
}

}  // namespace ember::jinja
