// The values a Jinja template computes with, modelled on the Python objects jinja2 sees.
//
// Chat templates are written against Python semantics (truthiness, ==, str(), repr(), dict order),
// so each Value kind mirrors one Python type and the free functions below reproduce the Python
// behaviour the engine needs. Lists and dicts are immutable once built (the sandbox HF renders in
// forbids mutating them), so they are shared by pointer; namespaces are the one mutable object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace ember::jinja {

class Value;
class Interpreter;

// Arguments of a call as Python receives them.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Anything a template can call: macros, globals such as range(), bound methods like str.split.
class Function {
 public:
  virtual ~Function() = default;
  virtual std::string Name() const = 0;
  virtual Expected<Value> Call(Interpreter& interp, CallArgs args) const = 0;
};

// An object with named attributes: jinja2's namespace() and the `loop` variable.
struct ObjectData {
  std::string type_name;  // "Namespace" or "LoopContext", used in messages and repr
  bool assignable = false;  // `{% set ns.attr = ... %}` is allowed on namespaces only
  std::vector<std::pair<std::string, Value>> attrs;

  const Value* Find(std::string_view name) const;
  void Set(const std::string& name, Value value);
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,  // jinja2.Undefined: a missing variable, attribute or item
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kIterator,  // a generator (select, map, ...): iterable once, no len(), always truthy
    kDict,
    kObject,
    kFunction,
  };
  using Items = std::vector<Value>;
  using Entries = std::vector<std::pair<Value, Value>>;

  // Undefined. `hint` is the message jinja2 raises when the value is used in a way that needs a
  // real value, e.g. "'messages' is undefined".
  Value() = default;
  static Value Undefined(std::string hint = {});
  static Value None();
  static Value Bool(bool v);
  static Value Int(int64_t v);
  static Value Float(double v);
  static Value Str(std::string v);
  static Value List(Items items);
  static Value Tuple(Items items);
  static Value Iterator(Items items);
  // Entries are kept in the given order; later duplicates of a key replace the earlier value in
  // place, as a Python dict literal does.
  static Value Dict(Entries entries);
  static Value Object(std::shared_ptr<ObjectData> object);
  static Value Func(std::shared_ptr<const Function> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_function() const { return kind_ == Kind::kFunction; }
  // list, tuple or iterator: anything holding Items.
  bool is_sequence() const {
    return kind_ == Kind::kList || kind_ == Kind::kTuple || kind_ == Kind::kIterator;
  }
  // int, float or bool (bool is an int subclass in Python).
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  // int or bool: usable as an index.
  bool is_integral() const { return kind_ == Kind::kInt || kind_ == Kind::kBool; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return kind_ == Kind::kBool ? as_bool() : std::get<int64_t>(data_); }
  double as_double() const;  // any number
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const std::string& undefined_hint() const { return std::get<std::string>(data_); }
  const Items& items() const { return *std::get<std::shared_ptr<const Items>>(data_); }
  const Entries& entries() const { return *std::get<std::shared_ptr<const Entries>>(data_); }
  ObjectData& object() const { return *std::get<std::shared_ptr<ObjectData>>(data_); }
  const Function& function() const { return *std::get<std::shared_ptr<const Function>>(data_); }
  // Identity, for `is sameas` and == on objects/functions.
  const void* identity() const;
  // Container nesting: 0 for scalars (and for objects, which are opaque here), 1 + the deepest
  // element for lists, tuples and dicts. Bounded by kMaxValueDepth so that recursive printing,
  // comparison and destruction stay within the stack.
  int depth() const { return depth_; }

  // Dict lookup by Python equality (so 1, 1.0 and True are the same key); nullptr if absent.
  const Value* FindKey(const Value& key) const;
  const Value* FindKey(std::string_view key) const;

 private:
  Kind kind_ = Kind::kUndefined;
  uint16_t depth_ = 0;
  std::variant<std::string, bool, int64_t, double, std::shared_ptr<const Items>,
               std::shared_ptr<const Entries>, std::shared_ptr<ObjectData>,
               std::shared_ptr<const Function>>
      data_;
};

// The deepest container nesting the engine accepts, in inputs and in values templates build.
inline constexpr int kMaxValueDepth = 256;

// The most text one str()/repr()/tojson may produce on this thread. Lists are shared, so a small
// value can print as gigabytes ([[[1] * 1000] * 1000] * 1000); printing stops early once its
// output passes max_bytes and sets `exceeded`, which the interpreter turns into an error. A render
// sets it to its RenderLimits::max_bytes for its duration (PrintCapScope).
struct PrintCap {
  size_t max_bytes = SIZE_MAX;
  bool exceeded = false;
  // Bytes that Iterate copied (strings are copied with the list holding them), for the
  // interpreter to count against its limit at its next step.
  int64_t copied_bytes = 0;
};
PrintCap& CurrentPrintCap();
class PrintCapScope {
 public:
  explicit PrintCapScope(size_t max_bytes) : saved_(CurrentPrintCap()) { CurrentPrintCap() = {max_bytes, false, 0}; }
  ~PrintCapScope() { CurrentPrintCap() = saved_; }
  PrintCapScope(const PrintCapScope&) = delete;
  PrintCapScope& operator=(const PrintCapScope&) = delete;

 private:
  PrintCap saved_;
};
// Whether `out` has passed the cap (and marks it exceeded if so).
inline bool PastPrintCap(const std::string& out) {
  PrintCap& cap = CurrentPrintCap();
  if (out.size() > cap.max_bytes) cap.exceeded = true;
  return cap.exceeded;
}

// What copying v's top level costs: a slot per item (a key and a value per dict entry) and the
// strings among them, which are copied with it; nested containers are shared, so they cost
// nothing. A string costs its size.
int64_t ShallowBytes(const Value& v);

// Python truthiness.
bool Truthy(const Value& v);
// Python ==.
bool Equals(const Value& a, const Value& b);
// Python <, as -1/0/1 after == was ruled out by the caller; a TypeError message where Python
// refuses to order the operands.
Expected<int> Compare(const Value& a, const Value& b);
// Whether the value may be a dict key (Python hashability).
bool Hashable(const Value& v);

// Python type name, as used in Python's error messages: "str", "NoneType", "dict", ...
std::string TypeName(const Value& v);
// The type name in quotes, "'int'", as Python's messages quote it.
std::string QuotedTypeName(const Value& v);
// str(v) as jinja2 prints it: Undefined prints nothing, None prints "None".
std::string ToStr(const Value& v);
// repr(v), which str() of a container uses for its elements.
std::string Repr(const Value& v);

// Python iteration: items of a sequence, keys of a dict, code points of a string, nothing for
// Undefined. A TypeError message for values that are not iterable.
Expected<Value::Items> Iterate(const Value& v);
// len(v), or a TypeError message.
Expected<int64_t> Length(const Value& v);

// Converts JSON (template inputs) to values: objects keep their key order.
Value FromJson(const nlohmann::ordered_json& j);

// json.dumps as HF's tojson filter calls it.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: single line
  std::optional<std::pair<std::string, std::string>> separators;
  bool sort_keys = false;
};
Expected<std::string> DumpJson(const Value& v, const JsonDumpOptions& options);

}  // namespace ember::jinja
