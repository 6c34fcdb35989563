// Python methods templates call on values: str.strip(), dict.items(), list.index(), ...
//
// Which attributes exist follows Python (so `message.items` is the dict method even if the dict
// has an "items" key), and which are hidden follows the ImmutableSandboxedEnvironment. To support
// another method, add its name to the receiver's table and a branch to the matching Call*.
#include <algorithm>

#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/pystr.h"

namespace ember::jinja {
namespace {

using Bound = std::vector<std::optional<Value>>;

constexpr std::string_view kStrMethods[] = {
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
    "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier",
    "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower",
    "lstrip", "maketrans", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex",
    "rjust", "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip",
    "swapcase", "title", "translate", "upper", "zfill",
};
constexpr std::string_view kDictMethods[] = {"copy", "fromkeys", "get", "items", "keys", "values"};
constexpr std::string_view kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kListMethods[] = {"clear", "copy", "count", "index", "pop"};
constexpr std::string_view kListUnsafe[] = {"append", "extend", "insert", "remove", "reverse", "sort"};
constexpr std::string_view kTupleMethods[] = {"count", "index"};

template <size_t N>
bool In(const std::string_view (&table)[N], std::string_view name) {
  return std::find(std::begin(table), std::end(table), name) != std::end(table);
}

class BoundMethodFn : public Function {
 public:
  BoundMethodFn(Value receiver, std::string name) : receiver_(std::move(receiver)), name_(std::move(name)) {}
  std::string Name() const override { return "built-in method " + name_ + " of " + TypeName(receiver_) + " object"; }
  Expected<Value> Call(Interpreter& interp, CallArgs args) const override {
    return CallMethod(interp, receiver_, name_, std::move(args));
  }

 private:
  Value receiver_;
  std::string name_;
};

Status NotSupported(const Value& receiver, const std::string& name) {
  return Unimplemented(TypeName(receiver) + "." + name + "() is not supported by ember's Jinja subset");
}

Expected<int64_t> IntArg(const std::optional<Value>& v, int64_t fallback) {
  if (!v || v->is_none()) return fallback;
  if (!v->is_integral()) return InvalidArgument(QuotedTypeName(*v) + " object cannot be interpreted as an integer");
  return v->as_int();
}

Expected<std::optional<std::string>> OptStr(const std::optional<Value>& v) {
  if (!v || v->is_none()) return std::optional<std::string>();
  if (!v->is_string()) return InvalidArgument("expected str or None, not " + TypeName(*v));
  return std::optional<std::string>(v->as_string());
}

Value StrList(std::vector<std::string> parts) {
  Value::Items items;
  for (auto& p : parts) items.push_back(Value::Str(std::move(p)));
  return Value::List(std::move(items));
}

// str.startswith / endswith with an optional [start:end] window.
Expected<Value> AffixTest(const std::string& s, Bound b, bool prefix) {
  if (!b[0]) return InvalidArgument("startswith/endswith takes at least 1 argument");
  std::u32string cps = py::Decode(s);
  const auto n = static_cast<int64_t>(cps.size());
  EMBER_ASSIGN_OR_RETURN(int64_t start, IntArg(b[1], 0));
  EMBER_ASSIGN_OR_RETURN(int64_t end, IntArg(b[2], n));
  auto norm = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  start = norm(start);
  end = norm(end);
  const std::string window = start <= end ? py::Encode(std::u32string_view(cps).substr(start, end - start)) : "";
  Value::Items candidates = b[0]->kind() == Value::Kind::kTuple ? b[0]->items() : Value::Items{*b[0]};
  for (const Value& c : candidates) {
    if (!c.is_string()) return InvalidArgument("startswith/endswith first arg must be str or a tuple of str, not " + TypeName(c));
    const std::string& a = c.as_string();
    if (start > end) continue;
    if (a.size() <= window.size() &&
        (prefix ? window.compare(0, a.size(), a) == 0 : window.compare(window.size() - a.size(), a.size(), a) == 0)) {
      return Value::Bool(true);
    }
  }
  return Value::Bool(false);
}

// str.format with automatic or explicit field numbering, keyword fields and !s/!r conversions.
Expected<Value> StrFormat(Interpreter& interp, const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      else return InvalidArgument("Single '}' encountered in format string");
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) return InvalidArgument("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 0;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      if (colon + 1 != field.size()) return Unimplemented("format specs in str.format() are not supported");
      field.resize(colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : 0;
      field.resize(bang);
    }
    const size_t dot = field.find_first_of(".[");
    const std::string head = field.substr(0, dot);
    Value value;
    if (head.empty() || std::all_of(head.begin(), head.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t index = head.empty() ? auto_index++ : std::stoul(head);
      if (index >= args.positional.size()) return InvalidArgument("Replacement index " + std::to_string(index) + " out of range for positional args tuple");
      value = args.positional[index];
    } else {
      auto it = std::find_if(args.keyword.begin(), args.keyword.end(), [&](const auto& kv) { return kv.first == head; });
      if (it == args.keyword.end()) return InvalidArgument("KeyError: " + py::ReprString(head));
      value = it->second;
    }
    if (dot != std::string::npos) {
      EMBER_ASSIGN_OR_RETURN(value, interp.GetAttributePath(value, Value::Str(field.substr(dot + 1))));
    }
    out += conversion == 'r' ? Repr(value) : ToStr(value);
  }
  return Value::Str(std::move(out));
}

Expected<Value> Pad(Interpreter& interp, const std::string& s, Bound b, int align) {  // -1 ljust, 0 center, 1 rjust
  EMBER_ASSIGN_OR_RETURN(int64_t width, IntArg(b[0], 0));
  std::string fill = b[1] && b[1]->is_string() ? b[1]->as_string() : " ";
  if (py::Length(fill) != 1) return InvalidArgument("The fill character must be exactly one character long");
  const int64_t margin = width - py::Length(s);
  if (margin <= 0) return Value::Str(s);
  EMBER_RETURN_IF_ERROR(interp.CheckRoom(margin > INT64_MAX / 4 ? INT64_MAX : margin * static_cast<int64_t>(fill.size())));
  const int64_t left = align < 0 ? 0 : align > 0 ? margin : margin / 2 + (margin & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < margin - left; ++i) out += fill;
  return Value::Str(std::move(out));
}

template <bool (*Pred)(char32_t)>
Value AllChars(const std::string& s) {
  const std::u32string cps = py::Decode(s);
  return Value::Bool(!cps.empty() && std::all_of(cps.begin(), cps.end(), Pred));
}
bool DigitChar(char32_t c) { return c >= '0' && c <= '9'; }
bool AlphaChar(char32_t c) { return (c < 0x80 && std::isalpha(static_cast<int>(c))) || (c >= 0x80 && py::IsCased(c)); }
bool AlnumChar(char32_t c) { return DigitChar(c) || AlphaChar(c); }
bool AsciiChar(char32_t c) { return c < 0x80; }

Expected<Value> CallStr(Interpreter& interp, const std::string& s, const std::string& name, CallArgs args) {
  auto bind = [&](std::vector<std::string_view> params) { return BindArgs(name, std::move(args), params); };
  if (name == "format") return StrFormat(interp, s, args);
  if (name == "join") {
    EMBER_ASSIGN_OR_RETURN(Bound b, bind({"iterable"}));
    if (!b[0]) return InvalidArgument("join() takes exactly one argument");
    EMBER_ASSIGN_OR_RETURN(Value::Items items, Iterate(*b[0]));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return InvalidArgument("sequence item " + std::to_string(i) + ": expected str instance, " + TypeName(items[i]) + " found");
      }
      if (i > 0) out += s;
      out += items[i].as_string();
      EMBER_RETURN_IF_ERROR(interp.CheckRoom(static_cast<int64_t>(out.size())));
    }
    return Value::Str(std::move(out));
  }
  if (name == "startswith" || name == "endswith") {
    EMBER_ASSIGN_OR_RETURN(Bound b, bind({"prefix", "start", "end"}));
    return AffixTest(s, std::move(b), name == "startswith");
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    EMBER_ASSIGN_OR_RETURN(Bound b, bind({"chars"}));
    EMBER_ASSIGN_OR_RETURN(auto chars, OptStr(b[0]));
    return Value::Str(py::Strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    EMBER_ASSIGN_OR_RETURN(Bound b, bind({"sep", "maxsplit"}));
    EMBER_ASSIGN_OR_RETURN(auto sep, OptStr(b[0]));
    EMBER_ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(b[1], -1));
    if (sep && sep->empty()) return InvalidArgument("empty separator");
    return StrList(name == "split" ? py::Split(s, sep, maxsplit) : py::RSplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    EMBER_ASSIGN_OR_RETURN(Bound b, bind({"keepends"}));
    return StrList(py::SplitLines(s, b[0] && Truthy(*b[0])));
  }
  if (name == "replace") {
    EMBER_ASSIGN_OR_RETURN(Bound b, bind({"old", "new", "count"}));
    if (!b[0] || !b[1] || !b[0]->is_string() || !b[1]->is_string()) return InvalidArgument("replace() arguments must be str");
    EMBER_ASSIGN_OR_RETURN(int64_t count, IntArg(b[2], -1));
    EMBER_RETURN_IF_ERROR(CheckReplaceRoom(interp, s, b[0]->as_string(), b[1]->as_string(), count));
    return Value::Str(py::Replace(s, b[0]->as_string(), b[1]->as_string(), count));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    EMBER_ASSIGN_OR_RETURN(Bound b, bind({"sub"}));
    if (!b[0] || !b[0]->is_string()) return InvalidArgument("must be str");
    const std::string& sub = b[0]->as_string();
    if (name == "count") return Value::Int(py::Count(s, sub));
    const int64_t at = (name == "find" || name == "index") ? py::Find(s, sub) : py::RFind(s, sub);
    if (at < 0 && (name == "index" || name == "rindex")) return InvalidArgument("substring not found");
    return Value::Int(at);
  }
  if (name == "partition" || name == "rpartition") {
    EMBER_ASSIGN_OR_RETURN(Bound b, bind({"sep"}));
    if (!b[0] || !b[0]->is_string() || b[0]->as_string().empty()) return InvalidArgument("partition() needs a non-empty str separator");
    const std::string& sep = b[0]->as_string();
    const size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos) {
      return name == "partition" ? Value::Tuple({Value::Str(s), Value::Str(""), Value::Str("")})
                                 : Value::Tuple({Value::Str(""), Value::Str(""), Value::Str(s)});
    }
    return Value::Tuple({Value::Str(s.substr(0, at)), Value::Str(sep), Value::Str(s.substr(at + sep.size()))});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    EMBER_ASSIGN_OR_RETURN(Bound b, bind({"affix"}));
    if (!b[0] || !b[0]->is_string()) return InvalidArgument(name + "() argument must be str");
    const std::string& a = b[0]->as_string();
    if (name == "removeprefix") return Value::Str(s.compare(0, a.size(), a) == 0 ? s.substr(a.size()) : s);
    const bool ends = s.size() >= a.size() && s.compare(s.size() - a.size(), a.size(), a) == 0;
    return Value::Str(ends ? s.substr(0, s.size() - a.size()) : s);
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    EMBER_ASSIGN_OR_RETURN(Bound b, bind({"width", "fillchar"}));
    return Pad(interp, s, std::move(b), name == "ljust" ? -1 : name == "rjust" ? 1 : 0);
  }
  if (name == "zfill") {
    EMBER_ASSIGN_OR_RETURN(Bound b, bind({"width"}));
    EMBER_ASSIGN_OR_RETURN(int64_t width, IntArg(b[0], 0));
    const int64_t pad = width - py::Length(s);
    if (pad <= 0) return Value::Str(s);
    EMBER_RETURN_IF_ERROR(interp.CheckRoom(pad));
    const bool sign = !s.empty() && (s[0] == '+' || s[0] == '-');
    return Value::Str((sign ? s.substr(0, 1) : "") + std::string(pad, '0') + (sign ? s.substr(1) : s));
  }
  // The remaining methods take no arguments.
  EMBER_RETURN_IF_ERROR(bind({}).status());
  if (name == "upper") return Value::Str(py::Upper(s));
  if (name == "lower" || name == "casefold") return Value::Str(py::Lower(s));
  if (name == "title") return Value::Str(py::Title(s));
  if (name == "capitalize") return Value::Str(py::Capitalize(s));
  if (name == "swapcase") return Value::Str(py::SwapCase(s));
  if (name == "islower") return Value::Bool(py::IsLower(s));
  if (name == "isupper") return Value::Bool(py::IsUpper(s));
  if (name == "isspace") return AllChars<py::IsSpace>(s);
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") return AllChars<DigitChar>(s);
  if (name == "isalpha") return AllChars<AlphaChar>(s);
  if (name == "isalnum") return AllChars<AlnumChar>(s);
  if (name == "isascii") return Value::Bool(std::all_of(s.begin(), s.end(), [](char c) { return AsciiChar(static_cast<unsigned char>(c)); }));
  return NotSupported(Value::Str(s), name);
}

Expected<Value> CallDict(const Value& d, const std::string& name, CallArgs args) {
  if (name == "get") {
    EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs(name, std::move(args), {"key", "default"}));
    if (!b[0]) return InvalidArgument("get expected at least 1 argument, got 0");
    if (!Hashable(*b[0])) return InvalidArgument("unhashable type: '" + TypeName(*b[0]) + "'");
    if (const Value* v = d.FindKey(*b[0])) return *v;
    return b[1] ? *b[1] : Value::None();
  }
  EMBER_RETURN_IF_ERROR(BindArgs(name, std::move(args), {}).status());
  if (name == "copy") return d;
  Value::Items out;
  for (const auto& [k, v] : d.entries()) {
    out.push_back(name == "keys" ? k : name == "values" ? v : Value::Tuple({k, v}));
  }
  if (name == "items" || name == "keys" || name == "values") return Value::List(std::move(out));
  return NotSupported(d, name);
}

Expected<Value> CallSequence(const Value& seq, const std::string& name, CallArgs args) {
  if (name == "count" || name == "index") {
    EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs(name, std::move(args), {"value"}));
    if (!b[0]) return InvalidArgument(name + "() takes exactly one argument (0 given)");
    const auto& items = seq.items();
    int64_t count = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!Equals(items[i], *b[0])) continue;
      if (name == "index") return Value::Int(static_cast<int64_t>(i));
      ++count;
    }
    if (name == "index") return InvalidArgument(Repr(*b[0]) + " is not in " + TypeName(seq));
    return Value::Int(count);
  }
  if (name == "copy") {
    EMBER_RETURN_IF_ERROR(BindArgs(name, std::move(args), {}).status());
    return Value::List(seq.items());
  }
  // pop() and clear() pass HF's sandbox but would mutate; template lists here are immutable.
  return Unimplemented("list." + name + "() is not supported: lists are immutable in ember's Jinja subset");
}

}  // namespace

bool HasMethod(const Value& receiver, std::string_view name) {
  switch (receiver.kind()) {
    case Value::Kind::kString: return In(kStrMethods, name);
    case Value::Kind::kDict: return In(kDictMethods, name);
    case Value::Kind::kList: return In(kListMethods, name);
    case Value::Kind::kTuple: return In(kTupleMethods, name);
    default: return false;
  }
}

bool IsUnsafeMethod(const Value& receiver, std::string_view name) {
  if (receiver.is_dict()) return In(kDictUnsafe, name);
  if (receiver.kind() == Value::Kind::kList) return In(kListUnsafe, name);
  return false;
}

Value BoundMethod(const Value& receiver, const std::string& name) {
  return Value::Func(std::make_shared<BoundMethodFn>(receiver, name));
}

Expected<Value> CallMethod(Interpreter& interp, const Value& receiver, const std::string& name, CallArgs args) {
  switch (receiver.kind()) {
    case Value::Kind::kString: return CallStr(interp, receiver.as_string(), name, std::move(args));
    case Value::Kind::kDict: return CallDict(receiver, name, std::move(args));
    case Value::Kind::kList:
    case Value::Kind::kTuple: return CallSequence(receiver, name, std::move(args));
    default: return NotSupported(receiver, name);
  }
}

}  // namespace ember::jinja
