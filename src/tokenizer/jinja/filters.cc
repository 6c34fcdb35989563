// String and number filters, and the filter table.
//
// Each filter follows its jinja2 3.1 definition (jinja2/filters.py); `tojson` is HF's override,
// json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False). To add a
// filter: write `Expected<Value> Name(Interpreter&, const Value& input, CallArgs args)`, bind its
// parameters with BindArgs using jinja2's parameter names, and list it in kFilters below.
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/pystr.h"

namespace ember::jinja {

FilterFn FindSequenceFilter(std::string_view name);  // filters_seq.cc

namespace {

using Bound = std::vector<std::optional<Value>>;

Value Arg(const Bound& b, size_t i, Value fallback) { return b[i] ? *b[i] : std::move(fallback); }

Expected<Value> StrFilter(std::string_view name, const Value& in, CallArgs args,
                          std::string (*fn)(std::string_view)) {
  EMBER_RETURN_IF_ERROR(BindArgs(name, std::move(args), {}).status());
  return Value::Str(fn(ToStr(in)));
}

Expected<Value> Upper(Interpreter&, const Value& in, CallArgs a) { return StrFilter("upper", in, std::move(a), py::Upper); }
Expected<Value> Lower(Interpreter&, const Value& in, CallArgs a) { return StrFilter("lower", in, std::move(a), py::Lower); }
Expected<Value> Capitalize(Interpreter&, const Value& in, CallArgs a) {
  return StrFilter("capitalize", in, std::move(a), py::Capitalize);
}

// jinja2's title: upper-case the first character after each run of "-", whitespace, "(", "{",
// "[" or "<", lower-case the rest.
std::string TitleWords(std::string_view s) {
  std::u32string out;
  bool at_word_start = true;
  for (char32_t c : py::Decode(s)) {
    const bool separator = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py::IsSpace(c);
    std::string one;
    py::AppendUtf8(one, c);
    out += py::Decode(separator ? one : at_word_start ? py::Upper(one) : py::Lower(one));
    at_word_start = separator;
  }
  return py::Encode(out);
}
Expected<Value> Title(Interpreter&, const Value& in, CallArgs a) { return StrFilter("title", in, std::move(a), TitleWords); }

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}
Expected<Value> Escape(Interpreter&, const Value& in, CallArgs a) { return StrFilter("escape", in, std::move(a), HtmlEscape); }

std::string Identity(std::string_view s) { return std::string(s); }
// With autoescaping off (as HF renders), safe and string only convert to str.
Expected<Value> Safe(Interpreter&, const Value& in, CallArgs a) { return StrFilter("safe", in, std::move(a), Identity); }
Expected<Value> String(Interpreter&, const Value& in, CallArgs a) { return StrFilter("string", in, std::move(a), Identity); }

Expected<Value> Trim(Interpreter&, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("trim", std::move(args), {"chars"}));
  std::optional<std::string> chars;
  if (b[0] && !b[0]->is_none()) chars = ToStr(*b[0]);
  return Value::Str(py::Strip(ToStr(in), chars, true, true));
}

Expected<Value> Replace(Interpreter& interp, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("replace", std::move(args), {"old", "new", "count"}));
  if (!b[0] || !b[1]) return InvalidArgument("replace() missing required argument 'old' or 'new'");
  int64_t count = -1;
  if (b[2] && !b[2]->is_none()) {
    if (!b[2]->is_integral()) return InvalidArgument(QuotedTypeName(*b[2]) + " object cannot be interpreted as an integer");
    count = b[2]->as_int();
  }
  const std::string s = ToStr(in), old = ToStr(*b[0]), replacement = ToStr(*b[1]);
  EMBER_RETURN_IF_ERROR(CheckReplaceRoom(interp, s, old, replacement, count));
  return Value::Str(py::Replace(s, old, replacement, count));
}

Expected<Value> Center(Interpreter& interp, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("center", std::move(args), {"width"}));
  const Value width = Arg(b, 0, Value::Int(80));
  if (!width.is_integral()) return InvalidArgument(QuotedTypeName(width) + " object cannot be interpreted as an integer");
  const std::string s = ToStr(in);
  const int64_t len = py::Length(s);
  const int64_t margin = width.as_int() - len;
  if (margin <= 0) return Value::Str(s);
  EMBER_RETURN_IF_ERROR(interp.CheckRoom(margin));
  // CPython's str.center puts the odd space on the left when the width is odd.
  const int64_t left = margin / 2 + (margin & width.as_int() & 1);
  return Value::Str(std::string(left, ' ') + s + std::string(margin - left, ' '));
}

Expected<Value> Indent(Interpreter& interp, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("indent", std::move(args), {"width", "first", "blank"}));
  if (in.is_undefined()) return InvalidArgument(in.undefined_hint());
  if (!in.is_string()) return InvalidArgument("unsupported operand type(s) for +=: '" + TypeName(in) + "' and 'str'");
  const Value width = Arg(b, 0, Value::Int(4));
  std::string indention;
  if (width.is_string()) {
    indention = width.as_string();
  } else if (width.is_integral()) {
    EMBER_RETURN_IF_ERROR(interp.CheckRoom(width.as_int()));
    indention = std::string(std::max<int64_t>(0, width.as_int()), ' ');
  } else {
    return InvalidArgument("can't multiply sequence by non-int of type '" + TypeName(width) + "'");
  }
  // jinja2 appends a newline before splitting so that a trailing newline survives splitlines().
  const std::vector<std::string> lines = py::SplitLines(in.as_string() + "\n", false);
  const auto per_line = static_cast<int64_t>(indention.size());
  const auto line_count = static_cast<int64_t>(lines.size()) + 1;
  EMBER_RETURN_IF_ERROR(interp.CheckRoom(per_line > 0 && line_count > INT64_MAX / per_line
                                             ? INT64_MAX
                                             : per_line * line_count + static_cast<int64_t>(in.as_string().size())));
  std::string rv;
  if (Truthy(Arg(b, 2, Value::Bool(false)))) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i > 0 ? "\n" + indention : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += '\n';
      if (!lines[i].empty()) rv += indention + lines[i];
    }
  }
  if (Truthy(Arg(b, 1, Value::Bool(false)))) rv = indention + rv;
  return Value::Str(std::move(rv));
}

Expected<Value> Default(Interpreter&, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("default", std::move(args), {"default_value", "boolean"}));
  const bool boolean = b[1] && Truthy(*b[1]);
  if (in.is_undefined() || (boolean && !Truthy(in))) return Arg(b, 0, Value::Str(""));
  return in;
}

Expected<Value> ToJson(Interpreter& interp, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("tojson", std::move(args), {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonDumpOptions options;
  options.ensure_ascii = b[0] && Truthy(*b[0]);
  if (b[1] && !b[1]->is_none()) {
    if (b[1]->is_string()) {
      options.indent = b[1]->as_string();
    } else if (b[1]->is_integral()) {
      EMBER_RETURN_IF_ERROR(interp.CheckRoom(b[1]->as_int()));
      options.indent = std::string(std::max<int64_t>(0, b[1]->as_int()), ' ');
    } else {
      return InvalidArgument("tojson indent must be an int or a str, not " + TypeName(*b[1]));
    }
  }
  if (b[2] && !b[2]->is_none()) {
    const Value& sep = *b[2];
    if (!sep.is_sequence() || sep.items().size() != 2 || !sep.items()[0].is_string() || !sep.items()[1].is_string()) {
      return InvalidArgument("tojson separators must be a pair of strings");
    }
    options.separators = std::make_pair(sep.items()[0].as_string(), sep.items()[1].as_string());
  }
  options.sort_keys = b[3] && Truthy(*b[3]);
  EMBER_ASSIGN_OR_RETURN(std::string json, DumpJson(in, options));
  return Value::Str(std::move(json));
}

Expected<Value> Abs(Interpreter&, const Value& in, CallArgs args) {
  EMBER_RETURN_IF_ERROR(BindArgs("abs", std::move(args), {}).status());
  if (in.is_integral()) return Value::Int(in.as_int() < 0 ? -in.as_int() : in.as_int());
  if (in.is_float()) return Value::Float(std::fabs(in.as_double()));
  return InvalidArgument("bad operand type for abs(): '" + TypeName(in) + "'");
}

Expected<Value> Int(Interpreter&, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("int", std::move(args), {"default", "base"}));
  const Value fallback = Arg(b, 0, Value::Int(0));
  const Value base = Arg(b, 1, Value::Int(10));
  if (in.is_undefined()) return InvalidArgument(in.undefined_hint());
  if (in.is_integral()) return Value::Int(in.as_int());
  if (in.is_float()) {
    const double d = in.as_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value::Int(static_cast<int64_t>(d));
  }
  if (in.is_string()) {
    if (!base.is_integral() || base.as_int() != 10) {
      return Unimplemented("the int filter supports base 10 only");
    }
    if (auto i = py::ParseInt(in.as_string())) return Value::Int(*i);
    if (auto f = py::ParseFloat(in.as_string()); f && std::isfinite(*f) && std::fabs(*f) < 9.2e18) {
      return Value::Int(static_cast<int64_t>(*f));
    }
  }
  return fallback;
}

Expected<Value> Float(Interpreter&, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("float", std::move(args), {"default"}));
  if (in.is_undefined()) return InvalidArgument(in.undefined_hint());
  if (in.is_number()) return Value::Float(in.as_double());
  if (in.is_string()) {
    if (auto f = py::ParseFloat(in.as_string())) return Value::Float(*f);
  }
  return Arg(b, 0, Value::Float(0.0));
}

// Python's round(x, n) for floats: correctly rounded, ties to even on the exact binary value,
// which is what printf's %.*f computes.
double RoundHalfEven(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits < 0) {
    const double scale = std::pow(10.0, static_cast<double>(-digits));
    return std::nearbyint(x / scale) * scale;
  }
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::min<int64_t>(digits, 300)), x);
  return std::strtod(buf, nullptr);
}

Expected<Value> Round(Interpreter&, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("round", std::move(args), {"precision", "method"}));
  const Value precision = Arg(b, 0, Value::Int(0));
  const Value method = Arg(b, 1, Value::Str("common"));
  if (!precision.is_integral()) return InvalidArgument(QuotedTypeName(precision) + " object cannot be interpreted as an integer");
  if (!method.is_string() || (method.as_string() != "common" && method.as_string() != "ceil" && method.as_string() != "floor")) {
    return InvalidArgument("method must be common, ceil or floor");
  }
  if (in.is_undefined()) return InvalidArgument(in.undefined_hint());
  if (!in.is_number()) return InvalidArgument("type " + TypeName(in) + " doesn't define __round__ method");
  const int64_t digits = precision.as_int();
  if (method.as_string() == "common") {
    if (in.is_integral()) return Value::Int(in.as_int());  // round(int, n) stays an int
    return Value::Float(RoundHalfEven(in.as_double(), digits));
  }
  const double scale = std::pow(10.0, static_cast<double>(digits));
  const double scaled = in.as_double() * scale;
  return Value::Float((method.as_string() == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

Expected<Value> Format(Interpreter&, const Value& in, CallArgs args) {
  Value values;
  if (!args.keyword.empty()) {
    if (!args.positional.empty()) return InvalidArgument("can't handle positional and keyword arguments at the same time");
    Value::Entries entries;
    for (auto& [k, v] : args.keyword) entries.emplace_back(Value::Str(k), std::move(v));
    values = Value::Dict(std::move(entries));
  } else {
    values = Value::Tuple(std::move(args.positional));
  }
  EMBER_ASSIGN_OR_RETURN(std::string s, PercentFormat(ToStr(in), values));
  return Value::Str(std::move(s));
}

Expected<Value> Attr(Interpreter&, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("attr", std::move(args), {"name"}));
  if (!b[0]) return InvalidArgument("attr() missing required argument 'name'");
  const std::string name = ToStr(*b[0]);
  // Python attributes only: unlike obj.name, the attr filter never looks up dict keys.
  if (HasMethod(in, name)) return BoundMethod(in, name);
  if (in.is_object()) {
    if (const Value* v = in.object().Find(name)) return *v;
  }
  std::string hint = "'";
  hint += TypeName(in);
  return Value::Undefined(hint + " object' has no attribute " + py::ReprString(name));
}

Expected<Value> WordCount(Interpreter&, const Value& in, CallArgs args) {
  EMBER_RETURN_IF_ERROR(BindArgs("wordcount", std::move(args), {}).status());
  // len(re.findall(r"\w+", s)).
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : py::Decode(ToStr(in))) {
    const bool word_char = py::IsWordChar(c);
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::Int(words);
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", Abs},       {"attr", Attr},     {"capitalize", Capitalize}, {"center", Center},
    {"d", Default},     {"default", Default}, {"e", Escape},         {"escape", Escape},
    {"float", Float},   {"forceescape", Escape}, {"format", Format},  {"indent", Indent},
    {"int", Int},       {"lower", Lower},   {"replace", Replace},     {"round", Round},
    {"safe", Safe},     {"string", String}, {"title", Title},         {"tojson", ToJson},
    {"trim", Trim},     {"upper", Upper},   {"wordcount", WordCount},
};

// jinja2 filters this engine does not implement: known names, so templates that mention them in
// unused branches still parse; they fail with a clear error if a render reaches them.
constexpr std::string_view kUnimplementedFilters[] = {
    "filesizeformat", "groupby", "pprint", "random", "slice", "striptags", "truncate",
    "urlencode", "urlize", "wordwrap", "xmlattr",
};

}  // namespace

FilterFn FindFilter(std::string_view name) {
  for (const FilterEntry& e : kFilters) {
    if (e.name == name) return e.fn;
  }
  return FindSequenceFilter(name);
}

bool IsJinjaFilterName(std::string_view name) {
  if (FindFilter(name) != nullptr) return true;
  for (std::string_view n : kUnimplementedFilters) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace ember::jinja
