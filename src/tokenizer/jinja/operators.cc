// Python operator semantics on template values: arithmetic, concatenation, `in`, `%` formatting,
// and argument binding.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cctype>

#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/pystr.h"

namespace ember::jinja {
namespace {

using Op = ast::Binary::Op;

const char* Symbol(Op op) {
  switch (op) {
    case Op::kAdd: return "+";
    case Op::kSub: return "-";
    case Op::kMul: return "*";
    case Op::kDiv: return "/";
    case Op::kFloorDiv: return "//";
    case Op::kMod: return "%";
    case Op::kPow: return "** or pow()";
    default: return "?";
  }
}

Status Unsupported(Op op, const Value& a, const Value& b) {
  return InvalidArgument(std::string("unsupported operand type(s) for ") + Symbol(op) + ": '" +
                         TypeName(a) + "' and '" + TypeName(b) + "'");
}

// Python's float // and % (Objects/floatobject.c float_divmod).
void FloatDivMod(double vx, double wx, double* floordiv, double* mod) {
  double m = std::fmod(vx, wx);
  double div = (vx - m) / wx;
  if (m != 0.0) {
    if ((wx < 0) != (m < 0)) {
      m += wx;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, wx);
  }
  double fd;
  if (div != 0.0) {
    fd = std::floor(div);
    if (div - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, vx / wx);
  }
  *floordiv = fd;
  *mod = m;
}

Expected<Value> Repeat(const Value& seq, int64_t times) {
  // (The interpreter has checked that the result fits its limits; an empty one is built at once.)
  if (seq.is_string()) {
    if (seq.as_string().empty()) return Value::Str("");
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.as_string();
    return Value::Str(std::move(out));
  }
  Value::Items out;
  if (seq.items().empty()) times = 0;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.kind() == Value::Kind::kTuple ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

Expected<Value> Arithmetic(Op op, const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral() && op != Op::kDiv) {
    const int64_t x = a.as_int(), y = b.as_int();
    int64_t r = 0;
    switch (op) {
      case Op::kAdd:
        if (__builtin_add_overflow(x, y, &r)) break;
        return Value::Int(r);
      case Op::kSub:
        if (__builtin_sub_overflow(x, y, &r)) break;
        return Value::Int(r);
      case Op::kMul:
        if (__builtin_mul_overflow(x, y, &r)) break;
        return Value::Int(r);
      case Op::kFloorDiv:
      case Op::kMod: {
        if (y == 0) return InvalidArgument("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) break;  // the quotient overflows (and C++'s % is undefined)
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          m += y;
          q -= 1;
        }
        return Value::Int(op == Op::kFloorDiv ? q : m);
      }
      case Op::kPow: {
        if (y < 0) {
          if (x == 0) return InvalidArgument("0.0 cannot be raised to a negative power");
          return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
        }
        int64_t result = 1, base = x, e = y;
        bool overflow = false;
        while (e > 0 && !overflow) {
          if (e & 1) overflow = __builtin_mul_overflow(result, base, &result);
          e >>= 1;
          if (e > 0 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
        }
        if (overflow) break;
        return Value::Int(result);
      }
      default:
        break;
    }
    return InvalidArgument(std::string("integer overflow in ") + Symbol(op) +
                           ": ember's templates use 64-bit integers");
  }
  const double x = a.as_double(), y = b.as_double();
  switch (op) {
    case Op::kAdd: return Value::Float(x + y);
    case Op::kSub: return Value::Float(x - y);
    case Op::kMul: return Value::Float(x * y);
    case Op::kDiv:
      if (y == 0) return InvalidArgument("division by zero");
      return Value::Float(x / y);
    case Op::kFloorDiv:
    case Op::kMod: {
      if (y == 0) return InvalidArgument(op == Op::kMod ? "float modulo" : "float floor division by zero");
      double fd, m;
      FloatDivMod(x, y, &fd, &m);
      return Value::Float(op == Op::kFloorDiv ? fd : m);
    }
    case Op::kPow:
      if (x == 0 && y < 0) return InvalidArgument("0.0 cannot be raised to a negative power");
      return Value::Float(std::pow(x, y));
    default:
      return Internal("not an arithmetic operator");
  }
}

}  // namespace

Expected<Value> BinaryOp(Op op, const Value& a, const Value& b) {
  if (op == Op::kConcat) return Value::Str(ToStr(a) + ToStr(b));
  // Undefined fails every arithmetic operator, with its own explanation.
  if (a.is_undefined()) return InvalidArgument(a.undefined_hint());
  if (b.is_undefined()) return InvalidArgument(b.undefined_hint());
  if (a.is_number() && b.is_number()) return Arithmetic(op, a, b);
  const bool a_seq = a.kind() == Value::Kind::kList || a.kind() == Value::Kind::kTuple;
  const bool b_seq = b.kind() == Value::Kind::kList || b.kind() == Value::Kind::kTuple;
  switch (op) {
    case Op::kAdd:
      if (a.is_string() && b.is_string()) return Value::Str(a.as_string() + b.as_string());
      if (a.is_string()) {
        return InvalidArgument("can only concatenate str (not \"" + TypeName(b) + "\") to str");
      }
      if (a_seq && a.kind() == b.kind()) {
        Value::Items out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return a.kind() == Value::Kind::kTuple ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
      }
      if (a_seq) {
        return InvalidArgument("can only concatenate " + TypeName(a) + " (not \"" + TypeName(b) + "\") to " +
                               TypeName(a));
      }
      break;
    case Op::kMul:
      if ((a.is_string() || a_seq) && b.is_integral()) return Repeat(a, b.as_int());
      if (a.is_integral() && (b.is_string() || b_seq)) return Repeat(b, a.as_int());
      break;
    case Op::kMod:
      if (a.is_string()) {
        EMBER_ASSIGN_OR_RETURN(std::string s, PercentFormat(a.as_string(), b));
        return Value::Str(std::move(s));
      }
      break;
    default:
      break;
  }
  return Unsupported(op, a, b);
}

Expected<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;  // Undefined iterates as empty
    case Value::Kind::kString:
      if (!item.is_string()) {
        return InvalidArgument("'in <string>' requires string as left operand, not " + TypeName(item));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kIterator:
      for (const Value& v : container.items()) {
        if (Equals(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (!Hashable(item)) return InvalidArgument("unhashable type: '" + TypeName(item) + "'");
      return container.FindKey(item) != nullptr;
    default:
      return InvalidArgument("argument of type '" + TypeName(container) + "' is not iterable");
  }
}

Status CheckReplaceRoom(const Interpreter& interp, const std::string& s, const std::string& old,
                        const std::string& replacement, int64_t count) {
  if (replacement.size() <= old.size()) return Status::Ok();  // never longer than `s`
  int64_t n = old.empty() ? py::Length(s) + 1 : py::Count(s, old);
  if (count >= 0) n = std::min(n, count);
  const auto growth = static_cast<int64_t>(replacement.size() - old.size());
  int64_t total = 0;
  if (__builtin_mul_overflow(n, growth, &total) || __builtin_add_overflow(total, static_cast<int64_t>(s.size()), &total)) {
    total = INT64_MAX;
  }
  return interp.CheckRoom(total);
}

Expected<std::string> PercentFormat(const std::string& format, const Value& args) {
  // A tuple supplies one value per conversion; anything else is the single value (a dict serves
  // %(name)s conversions).
  Value::Items values;
  if (args.kind() == Value::Kind::kTuple) {
    values = args.items();
  } else {
    values.push_back(args);
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (++i >= format.size()) return InvalidArgument("incomplete format");
    const Value* value = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string::npos) return InvalidArgument("incomplete format key");
      if (!args.is_dict()) return InvalidArgument("format requires a mapping");
      value = args.FindKey(std::string_view(format).substr(i + 1, close - i - 1));
      if (value == nullptr) return InvalidArgument("format key " + format.substr(i + 1, close - i - 1) + " not found");
      i = close + 1;
    }
    std::string spec = "%";
    while (i < format.size() && std::string_view("-+ #0").find(format[i]) != std::string_view::npos) spec += format[i++];
    std::string width_digits, precision_digits;
    while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i]))) width_digits += format[i++];
    spec += width_digits;
    if (i < format.size() && format[i] == '.') {
      spec += format[i++];
      while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i]))) precision_digits += format[i++];
      spec += precision_digits;
    }
    if (i >= format.size()) return InvalidArgument("incomplete format");
    const char conv = format[i];
    // Widths and precisions build that many bytes before anything checks them: bounded by the
    // render's print cap for %s/%r, and by the snprintf buffer below for numbers.
    for (const std::string& digits : {width_digits, precision_digits}) {
      const unsigned long long number = digits.size() > 18 ? ~0ull : std::strtoull(digits.c_str(), nullptr, 10);
      const bool text = conv == 's' || conv == 'r';
      if ((text && conv != '%' && number > CurrentPrintCap().max_bytes) || (!text && conv != '%' && number > 400)) {
        return InvalidArgument("format width or precision too big in '" + spec + conv + "'");
      }
    }
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (value == nullptr) {
      if (next >= values.size()) return InvalidArgument("not enough arguments for format string");
      value = &values[next++];
    }
    char buf[512];
    switch (conv) {
      case 's':
      case 'r': {
        // Padded by hand: widths count code points and the text may be long.
        std::u32string text = py::Decode(conv == 's' ? ToStr(*value) : Repr(*value));
        const size_t dot = spec.find('.');
        if (dot != std::string::npos) text = text.substr(0, std::strtoul(spec.c_str() + dot + 1, nullptr, 10));
        const size_t width_at = spec.find_first_of("123456789");
        const size_t width = width_at != std::string::npos && width_at < dot ? std::strtoul(spec.c_str() + width_at, nullptr, 10) : 0;
        const std::string padding(width > text.size() ? width - text.size() : 0, ' ');
        const bool left = spec.find('-') != std::string::npos;
        out += (left ? "" : padding) + py::Encode(text) + (left ? padding : "");
        break;
      }
      case 'd':
      case 'i':
        if (!value->is_number()) return InvalidArgument("%" + std::string(1, conv) + " format: a real number is required, not " + TypeName(*value));
        if (value->is_float() && !std::isfinite(value->as_double())) {
          return InvalidArgument("cannot convert float " + py::ReprFloat(value->as_double()) + " to integer");
        }
        if (value->is_float() && std::fabs(value->as_double()) >= 9.2e18) {
          // Beyond long long (the cast would be undefined): the float's integral digits, as Python prints them.
          std::snprintf(buf, sizeof(buf), (spec + ".0f").c_str(), std::trunc(value->as_double()));
        } else {
          std::snprintf(buf, sizeof(buf), (spec + "lld").c_str(),
                        static_cast<long long>(value->is_float() ? std::trunc(value->as_double()) : value->as_int()));
        }
        out += buf;
        break;
      case 'f': case 'F': case 'e': case 'E': case 'g': case 'G':
        if (!value->is_number()) return InvalidArgument("must be real number, not " + TypeName(*value));
        std::snprintf(buf, sizeof(buf), (spec + conv).c_str(), value->as_double());
        out += buf;
        break;
      case 'x': case 'X': case 'o':
        if (!value->is_integral()) return InvalidArgument("%" + std::string(1, conv) + " format: an integer is required, not " + TypeName(*value));
        std::snprintf(buf, sizeof(buf), (spec + "ll" + conv).c_str(), static_cast<long long>(value->as_int()));
        out += buf;
        break;
      default:
        return InvalidArgument("unsupported format character '" + std::string(1, conv) + "'");
    }
  }
  if (!args.is_dict() && next < values.size()) {
    return InvalidArgument("not all arguments converted during string formatting");
  }
  return out;
}

Expected<std::vector<std::optional<Value>>> BindArgs(std::string_view function, CallArgs args,
                                                     const std::vector<std::string_view>& params) {
  std::vector<std::optional<Value>> bound(params.size());
  if (args.positional.size() > params.size()) {
    return InvalidArgument(std::string(function) + "() takes at most " + std::to_string(params.size()) +
                           " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = std::move(args.positional[i]);
  for (auto& [name, value] : args.keyword) {
    size_t i = 0;
    while (i < params.size() && params[i] != name) ++i;
    if (i == params.size()) {
      return InvalidArgument(std::string(function) + "() got an unexpected keyword argument " + py::ReprString(name));
    }
    if (bound[i]) {
      return InvalidArgument(std::string(function) + "() got multiple values for argument " + py::ReprString(name));
    }
    bound[i] = std::move(value);
  }
  return bound;
}

}  // namespace ember::jinja
