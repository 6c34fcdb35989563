// Global functions of HF's chat-template environment (transformers' _compile_jinja_template):
// raise_exception, strftime_now, a dict() and a namespace() that refuse underscore names, plus
// jinja2's own range (capped by the sandbox) and namespace.
#include <ctime>
#include <functional>

#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/pystr.h"

namespace ember::jinja {
namespace {

// The sandbox refuses ranges longer than this (jinja2.sandbox.MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

class NativeFunction : public Function {
 public:
  using Impl = std::function<Expected<Value>(Interpreter&, CallArgs)>;
  NativeFunction(std::string name, Impl impl) : name_(std::move(name)), impl_(std::move(impl)) {}
  std::string Name() const override { return "function " + name_; }
  Expected<Value> Call(Interpreter& interp, CallArgs args) const override { return impl_(interp, std::move(args)); }

 private:
  std::string name_;
  Impl impl_;
};

Expected<Value> Range(Interpreter&, CallArgs args) {
  if (!args.keyword.empty()) return InvalidArgument("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3) {
    return InvalidArgument("range expected 1 to 3 arguments, got " + std::to_string(args.positional.size()));
  }
  int64_t bounds[3] = {0, 0, 1};
  for (size_t i = 0; i < args.positional.size(); ++i) {
    const Value& v = args.positional[i];
    if (!v.is_integral()) return InvalidArgument(QuotedTypeName(v) + " object cannot be interpreted as an integer");
    bounds[args.positional.size() == 1 ? 1 : i] = v.as_int();
  }
  const int64_t start = bounds[0], stop = bounds[1], step = bounds[2];
  if (step == 0) return InvalidArgument("range() arg 3 must not be zero");
  // In 128 bits: stop - start and the rounding overflow 64 for bounds near the int64 limits.
  const __int128 span = static_cast<__int128>(stop) - start, by = step;
  const __int128 count128 = step > 0 ? (span > 0 ? (span + by - 1) / by : 0) : (span < 0 ? (-span - by - 1) / -by : 0);
  const int64_t count = count128 > kMaxRange ? kMaxRange + 1 : static_cast<int64_t>(count128);
  if (count > kMaxRange) {
    return InvalidArgument("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  Value::Items items;
  items.reserve(count);
  for (int64_t i = 0; i < count; ++i) items.push_back(Value::Int(start + i * step));
  return Value::List(std::move(items));
}

// dict(*args, **kwargs) as Python builds it: a mapping or an iterable of pairs, then keywords.
Expected<Value::Entries> DictEntries(std::string_view fn, CallArgs args) {
  if (args.positional.size() > 1) {
    return InvalidArgument(std::string(fn) + " expected at most 1 argument, got " + std::to_string(args.positional.size()));
  }
  Value::Entries entries;
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      entries = source.entries();
    } else {
      EMBER_ASSIGN_OR_RETURN(Value::Items pairs, Iterate(source));
      for (const Value& pair : pairs) {
        auto kv = Iterate(pair);
        if (!kv.ok() || kv->size() != 2) return InvalidArgument("dictionary update sequence element has the wrong length");
        if (!Hashable((*kv)[0])) return InvalidArgument("unhashable type: '" + TypeName((*kv)[0]) + "'");
        entries.emplace_back((*kv)[0], (*kv)[1]);
      }
    }
  }
  for (auto& [k, v] : args.keyword) entries.emplace_back(Value::Str(k), std::move(v));
  return entries;
}

Expected<Value> Dict(Interpreter&, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Value::Entries entries, DictEntries("dict", std::move(args)));
  return Value::Dict(std::move(entries));
}

Expected<Value> Namespace(Interpreter& interp, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Value::Entries entries, DictEntries("namespace", std::move(args)));
  auto ns = std::make_shared<ObjectData>();
  ns->type_name = "Namespace";
  ns->assignable = true;
  const Value attrs = Value::Dict(std::move(entries));  // later duplicates win, as in dict()
  for (const auto& [k, v] : attrs.entries()) {
    if (!k.is_string()) return InvalidArgument("namespace() keys must be strings");
    if (!k.as_string().empty() && k.as_string()[0] == '_') {
      return InvalidArgument("Chat templates cannot store underscore-prefixed attributes on a namespace, but got " +
                             py::ReprString(k.as_string()) + ". Please rename the attribute.");
    }
    ns->attrs.emplace_back(k.as_string(), v);
  }
  interp.TrackNamespace(ns);
  return Value::Object(std::move(ns));
}

Expected<Value> RaiseException(Interpreter&, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(auto b, BindArgs("raise_exception", std::move(args), {"message"}));
  if (!b[0]) return InvalidArgument("raise_exception() missing required argument 'message'");
  return InvalidArgument("raise_exception(): " + ToStr(*b[0]));
}

// Python's datetime.strftime on a naive local time: %z and %Z are empty and %f is microseconds
// (always zero here); everything else is the C library's strftime, as CPython uses it.
std::string PyStrftime(const std::string& format, std::tm tm) {
  std::string fmt;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      const char c = format[i + 1];
      if (c == 'z' || c == 'Z') {
        ++i;
        continue;
      }
      if (c == 'f') {
        fmt += "000000";
        ++i;
        continue;
      }
      if (c == ':' && i + 2 < format.size() && format[i + 2] == 'z') {
        i += 2;
        continue;
      }
      fmt += format.substr(i, 2);
      ++i;
      continue;
    }
    fmt.push_back(format[i]);
  }
  if (fmt.empty()) return "";
  std::tm normalized = tm;
  timegm(&normalized);  // fills tm_wday and tm_yday without involving the time zone
  tm.tm_wday = normalized.tm_wday;
  tm.tm_yday = normalized.tm_yday;
  std::string out(256 + fmt.size() * 8, '\0');
  const size_t n = std::strftime(out.data(), out.size(), fmt.c_str(), &tm);
  out.resize(n);
  return out;
}

Expected<Value> StrftimeNow(Interpreter& interp, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(auto b, BindArgs("strftime_now", std::move(args), {"format"}));
  if (!b[0] || !b[0]->is_string()) return InvalidArgument("strftime_now() argument must be str");
  std::tm now{};
  if (interp.options().now) {
    now = *interp.options().now;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  return Value::Str(PyStrftime(b[0]->as_string(), now));
}

void Add(Frame& frame, const std::string& name, NativeFunction::Impl impl) {
  frame.Set(name, Value::Func(std::make_shared<NativeFunction>(name, std::move(impl))));
}

}  // namespace

void AddGlobals(Frame& frame) {
  Add(frame, "range", Range);
  Add(frame, "dict", Dict);
  Add(frame, "namespace", Namespace);
  Add(frame, "raise_exception", RaiseException);
  Add(frame, "strftime_now", StrftimeNow);
  for (const char* name : {"lipsum", "cycler", "joiner"}) {
    Add(frame, name, [name](Interpreter&, CallArgs) -> Expected<Value> {
      return Unimplemented(std::string(name) + "() is not supported by ember's Jinja subset");
    });
  }
}

}  // namespace ember::jinja
