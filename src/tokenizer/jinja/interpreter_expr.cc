// Expression evaluation and the sandboxed attribute/item lookup rules.
#include <algorithm>

#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/pystr.h"

namespace ember::jinja {
namespace {

using Kind = Value::Kind;

// jinja2's object_type_repr, quoted as its Undefined messages quote it.
std::string ObjectTypeRepr(const Value& v) {
  if (v.is_none()) return "None";
  std::string out = "'";
  out += TypeName(v);
  return out + " object'";
}

Value MissingAttribute(const Value& object, const std::string& name) {
  return Value::Undefined(ObjectTypeRepr(object) + " has no attribute " + py::ReprString(name));
}

Value MissingItem(const Value& object, const Value& key) {
  if (key.is_string()) return MissingAttribute(object, key.as_string());
  return Value::Undefined(ObjectTypeRepr(object) + " has no element " + Repr(key));
}

// Python's slice.indices(): clamps start/stop for a sequence of length n.
void AdjustSlice(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step,
                 int64_t* out_start, int64_t* out_stop) {
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  *out_start = clamp(start, step < 0 ? n - 1 : 0);
  *out_stop = clamp(stop, step < 0 ? -1 : n);
}

}  // namespace

const Value* Frame::Lookup(std::string_view name) const {
  for (const Frame* f = this; f != nullptr; f = f->parent.get()) {
    for (const auto& [key, value] : f->vars) {
      if (key == name) return &value;
    }
  }
  return nullptr;
}

void Frame::Set(const std::string& name, Value value) {
  for (auto& [key, existing] : vars) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  vars.emplace_back(name, std::move(value));
}

Status Interpreter::Located(Status status, const ast::Pos& pos) {
  if (status.ok() || error_located_) return status;
  error_located_ = true;
  return Status(status.code(), "template render error at " + Location(pos.line, pos.column) + ": " +
                                   status.message());
}

Expected<Value> Interpreter::GetAttr(const Value& object, const std::string& name) {
  if (object.is_undefined()) return InvalidArgument(object.undefined_hint());
  // The sandbox hides Python internals; a name like __class__ yields an unusable Undefined.
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_') {
    return Value::Undefined("access to attribute " + py::ReprString(name) + " of " +
                            py::ReprString(TypeName(object)) + " object is unsafe.");
  }
  if (IsUnsafeMethod(object, name)) {
    return Value::Undefined("access to attribute " + py::ReprString(name) + " of " +
                            py::ReprString(TypeName(object)) + " object is unsafe.");
  }
  if (HasMethod(object, name)) return BoundMethod(object, name);
  switch (object.kind()) {
    case Kind::kDict:
      if (const Value* v = object.FindKey(std::string_view(name))) return *v;
      break;
    case Kind::kObject:
      if (const Value* v = object.object().Find(name)) return *v;
      break;
    default:
      break;
  }
  return MissingAttribute(object, name);
}

Expected<Value> Interpreter::GetItem(const Value& object, const Value& key) {
  if (object.is_undefined()) return InvalidArgument(object.undefined_hint());
  switch (object.kind()) {
    case Kind::kDict:
      if (Hashable(key)) {
        if (const Value* v = object.FindKey(key)) return *v;
      }
      break;
    case Kind::kList:
    case Kind::kTuple:
      if (key.is_integral()) {
        const auto& items = object.items();
        int64_t i = key.as_int();
        if (i < 0) i += static_cast<int64_t>(items.size());
        if (i >= 0 && i < static_cast<int64_t>(items.size())) return items[i];
        return MissingItem(object, key);
      }
      break;
    case Kind::kString:
      if (key.is_integral()) {
        const std::u32string cps = py::Decode(object.as_string());
        int64_t i = key.as_int();
        if (i < 0) i += static_cast<int64_t>(cps.size());
        if (i >= 0 && i < static_cast<int64_t>(cps.size())) return Value::Str(py::Encode(cps.substr(i, 1)));
        return MissingItem(object, key);
      }
      break;
    default:
      break;
  }
  // jinja2 falls back to the attribute of that name for string keys (d['items'] is the method).
  if (key.is_string()) return GetAttr(object, key.as_string());
  return MissingItem(object, key);
}

Expected<Value> Interpreter::CallValue(const Value& callee, CallArgs args) {
  if (callee.is_function()) return callee.function().Call(*this, std::move(args));
  if (callee.is_undefined()) return InvalidArgument(callee.undefined_hint());
  return InvalidArgument(QuotedTypeName(callee) + " object is not callable");
}

Expected<Value> Interpreter::GetAttributePath(const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return GetItem(item, attribute);
  Value current = item;
  for (const std::string& part : py::Split(attribute.as_string(), std::string("."), -1)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    const Value key = digits ? Value::Int(std::stoll(part)) : Value::Str(part);
    EMBER_ASSIGN_OR_RETURN(current, GetItem(current, key));
  }
  return current;
}

Expected<Value> Interpreter::EvalNode(const ast::Expr& expr, const FramePtr& frame) {
  using EK = ast::Expr::Kind;
  switch (expr.kind) {
    case EK::kLiteral:
      return static_cast<const ast::Literal&>(expr).value;
    case EK::kName: {
      const auto& name = static_cast<const ast::Name&>(expr).name;
      if (const Value* v = frame->Lookup(name)) return *v;
      return Value::Undefined(py::ReprString(name) + " is undefined");
    }
    case EK::kList: {
      const auto& node = static_cast<const ast::ListExpr&>(expr);
      Value::Items items;
      items.reserve(node.items.size());
      for (const auto& item : node.items) {
        EMBER_ASSIGN_OR_RETURN(Value v, Eval(*item, frame));
        items.push_back(std::move(v));
      }
      return node.tuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
    }
    case EK::kDict: {
      const auto& node = static_cast<const ast::DictExpr&>(expr);
      Value::Entries entries;
      for (const auto& [key_expr, value_expr] : node.items) {
        EMBER_ASSIGN_OR_RETURN(Value key, Eval(*key_expr, frame));
        if (!Hashable(key)) {
          return Located(InvalidArgument("unhashable type: '" + TypeName(key) + "'"), key_expr->pos);
        }
        EMBER_ASSIGN_OR_RETURN(Value value, Eval(*value_expr, frame));
        entries.emplace_back(std::move(key), std::move(value));
      }
      return Value::Dict(std::move(entries));
    }
    case EK::kGetAttr: {
      const auto& node = static_cast<const ast::GetAttr&>(expr);
      EMBER_ASSIGN_OR_RETURN(Value object, Eval(*node.object, frame));
      auto result = GetAttr(object, node.attr);
      if (!result.ok()) return Located(result.status(), node.pos);
      return result;
    }
    case EK::kGetItem: {
      const auto& node = static_cast<const ast::GetItem&>(expr);
      EMBER_ASSIGN_OR_RETURN(Value object, Eval(*node.object, frame));
      EMBER_ASSIGN_OR_RETURN(Value key, Eval(*node.index, frame));
      auto result = GetItem(object, key);
      if (!result.ok()) return Located(result.status(), node.pos);
      return result;
    }
    case EK::kSlice:
      return EvalSlice(static_cast<const ast::Slice&>(expr), frame);
    case EK::kCall:
      return EvalCall(static_cast<const ast::Call&>(expr), frame, nullptr);
    case EK::kFilter: {
      const auto& node = static_cast<const ast::Filter&>(expr);
      EMBER_ASSIGN_OR_RETURN(Value input, Eval(*node.input, frame));
      EMBER_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(node.args, frame));
      auto result = ApplyFilter(node.name, input, std::move(args));
      if (!result.ok()) return Located(result.status(), node.pos);
      return result;
    }
    case EK::kTest: {
      const auto& node = static_cast<const ast::Test&>(expr);
      EMBER_ASSIGN_OR_RETURN(Value input, Eval(*node.input, frame));
      EMBER_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(node.args, frame));
      auto result = ApplyTest(node.name, input, std::move(args));
      if (!result.ok()) return Located(result.status(), node.pos);
      return Value::Bool(*result != node.negated);
    }
    case EK::kUnary: {
      const auto& node = static_cast<const ast::Unary&>(expr);
      EMBER_ASSIGN_OR_RETURN(Value operand, Eval(*node.operand, frame));
      if (node.op == ast::Unary::Op::kNot) return Value::Bool(!Truthy(operand));
      if (operand.is_integral()) {
        if (node.op == ast::Unary::Op::kNeg && operand.as_int() == INT64_MIN) {
          return Located(InvalidArgument("integer overflow in unary -: ember's templates use 64-bit integers"), node.pos);
        }
        return Value::Int(node.op == ast::Unary::Op::kNeg ? -operand.as_int() : operand.as_int());
      }
      if (operand.is_float()) {
        return Value::Float(node.op == ast::Unary::Op::kNeg ? -operand.as_double() : operand.as_double());
      }
      if (operand.is_undefined()) return Located(InvalidArgument(operand.undefined_hint()), node.pos);
      return Located(InvalidArgument(std::string("bad operand type for unary ") +
                                     (node.op == ast::Unary::Op::kNeg ? "-" : "+") + ": '" +
                                     TypeName(operand) + "'"),
                     node.pos);
    }
    case EK::kBinary:
      return EvalBinary(static_cast<const ast::Binary&>(expr), frame);
    case EK::kCompare:
      return EvalCompare(static_cast<const ast::Compare&>(expr), frame);
    case EK::kCondExpr: {
      const auto& node = static_cast<const ast::CondExpr&>(expr);
      EMBER_ASSIGN_OR_RETURN(Value cond, Eval(*node.cond, frame));
      if (Truthy(cond)) return Eval(*node.then, frame);
      if (node.otherwise) return Eval(*node.otherwise, frame);
      return Value::Undefined("the inline if-expression on " + Location(node.pos.line, node.pos.column) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return Internal("unknown expression kind");
}

Expected<CallArgs> Interpreter::EvalArgs(const ast::Args& args, const FramePtr& frame) {
  CallArgs out;
  for (const auto& e : args.positional) {
    EMBER_ASSIGN_OR_RETURN(Value v, Eval(*e, frame));
    out.positional.push_back(std::move(v));
  }
  if (args.star) {
    EMBER_ASSIGN_OR_RETURN(Value v, Eval(*args.star, frame));
    auto items = Iterate(v);
    if (!items.ok()) return Located(items.status(), args.star->pos);
    for (Value& item : *items) out.positional.push_back(std::move(item));
  }
  for (const auto& [name, e] : args.keyword) {
    EMBER_ASSIGN_OR_RETURN(Value v, Eval(*e, frame));
    out.keyword.emplace_back(name, std::move(v));
  }
  if (args.double_star) {
    EMBER_ASSIGN_OR_RETURN(Value v, Eval(*args.double_star, frame));
    if (!v.is_dict()) {
      return Located(InvalidArgument("argument after ** must be a mapping, not " + TypeName(v)),
                     args.double_star->pos);
    }
    for (const auto& [key, value] : v.entries()) {
      if (!key.is_string()) return Located(InvalidArgument("keywords must be strings"), args.double_star->pos);
      out.keyword.emplace_back(key.as_string(), value);
    }
  }
  return out;
}

Expected<Value> Interpreter::EvalCall(const ast::Call& call, const FramePtr& frame, const Value* caller) {
  Value callee;
  if (call.callee->kind == ast::Expr::Kind::kGetAttr) {
    // obj.method(...): call the method directly instead of materialising a bound method.
    const auto& attr = static_cast<const ast::GetAttr&>(*call.callee);
    EMBER_ASSIGN_OR_RETURN(Value object, Eval(*attr.object, frame));
    if (HasMethod(object, attr.attr) && caller == nullptr) {
      EMBER_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call.args, frame));
      auto result = CallMethod(*this, object, attr.attr, std::move(args));
      if (!result.ok()) return Located(result.status(), call.pos);
      return result;
    }
    auto looked_up = GetAttr(object, attr.attr);
    if (!looked_up.ok()) return Located(looked_up.status(), attr.pos);
    callee = std::move(*looked_up);
  } else {
    EMBER_ASSIGN_OR_RETURN(callee, Eval(*call.callee, frame));
  }
  EMBER_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call.args, frame));
  if (caller != nullptr) args.keyword.emplace_back("caller", *caller);
  auto result = CallValue(callee, std::move(args));
  if (!result.ok()) return Located(result.status(), call.pos);
  return result;
}

Expected<Value> Interpreter::EvalBinary(const ast::Binary& node, const FramePtr& frame) {
  EMBER_ASSIGN_OR_RETURN(Value left, Eval(*node.left, frame));
  // `and` / `or` short-circuit and yield an operand, as in Python.
  if (node.op == ast::Binary::Op::kAnd) return Truthy(left) ? Eval(*node.right, frame) : Expected<Value>(left);
  if (node.op == ast::Binary::Op::kOr) return Truthy(left) ? Expected<Value>(left) : Eval(*node.right, frame);
  EMBER_ASSIGN_OR_RETURN(Value right, Eval(*node.right, frame));
  if (node.op == ast::Binary::Op::kMul) {
    // str * n and list * n: ask before building (Repeat itself cannot).
    const bool left_repeats = (left.is_string() || left.is_sequence()) && right.is_integral();
    const bool right_repeats = left.is_integral() && (right.is_string() || right.is_sequence());
    if (left_repeats || right_repeats) {
      const Value& seq = left_repeats ? left : right;
      const int64_t times = left_repeats ? right.as_int() : left.as_int();
      const int64_t each = ShallowBytes(seq);
      int64_t total = 0;
      if (times > 0 && __builtin_mul_overflow(each, times, &total)) total = INT64_MAX;
      if (Status room = CheckRoom(total); !room.ok()) return Located(room, node.pos);
    }
  }
  auto result = BinaryOp(node.op, left, right);
  if (!result.ok()) return Located(result.status(), node.pos);
  return result;
}

Expected<Value> Interpreter::EvalCompare(const ast::Compare& node, const FramePtr& frame) {
  EMBER_ASSIGN_OR_RETURN(Value left, Eval(*node.first, frame));
  for (const auto& [op, operand] : node.rest) {
    EMBER_ASSIGN_OR_RETURN(Value right, Eval(*operand, frame));
    bool holds = false;
    using Op = ast::Compare::Op;
    switch (op) {
      case Op::kEq: holds = Equals(left, right); break;
      case Op::kNe: holds = !Equals(left, right); break;
      case Op::kIn:
      case Op::kNotIn: {
        auto in = Contains(right, left);
        if (!in.ok()) return Located(in.status(), operand->pos);
        holds = *in == (op == Op::kIn);
        break;
      }
      default: {
        auto c = Compare(left, right);
        if (!c.ok()) {
          std::string message = c.status().message();
          static constexpr const char* kSymbols[] = {"==", "!=", "<", "<=", ">", ">="};
          if (const size_t at = message.find("'<'"); at != std::string::npos) {
            message.replace(at, 3, std::string("'") + kSymbols[static_cast<int>(op)] + "'");
          }
          return Located(InvalidArgument(message), node.pos);
        }
        holds = op == Op::kLt ? *c < 0 : op == Op::kLe ? *c <= 0 : op == Op::kGt ? *c > 0 : *c >= 0;
      }
    }
    if (!holds) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

Expected<Value> Interpreter::EvalSlice(const ast::Slice& node, const FramePtr& frame) {
  EMBER_ASSIGN_OR_RETURN(Value object, Eval(*node.object, frame));
  std::optional<int64_t> bounds[3];
  const ast::Expr* parts[3] = {node.start.get(), node.stop.get(), node.step.get()};
  bool valid = true;
  for (int i = 0; i < 3; ++i) {
    if (parts[i] == nullptr) continue;
    EMBER_ASSIGN_OR_RETURN(Value v, Eval(*parts[i], frame));
    if (v.is_integral()) {
      bounds[i] = v.as_int();
    } else if (!v.is_none()) {
      valid = false;  // Python raises TypeError, which jinja2 turns into Undefined
    }
  }
  if (object.is_undefined()) return Located(InvalidArgument(object.undefined_hint()), node.pos);
  const int64_t step = bounds[2].value_or(1);
  if (step == 0) return Located(InvalidArgument("slice step cannot be zero"), node.pos);
  const bool is_string = object.is_string();
  if (!valid || !(is_string || object.kind() == Kind::kList || object.kind() == Kind::kTuple)) {
    return Value::Undefined(ObjectTypeRepr(object) + " has no element slice");
  }
  std::u32string cps;
  if (is_string) cps = py::Decode(object.as_string());
  const int64_t n = is_string ? static_cast<int64_t>(cps.size()) : static_cast<int64_t>(object.items().size());
  int64_t start, stop;
  AdjustSlice(n, bounds[0], bounds[1], step, &start, &stop);
  std::u32string out_chars;
  Value::Items out_items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (is_string) {
      out_chars.push_back(cps[i]);
    } else {
      out_items.push_back(object.items()[i]);
    }
    if (__builtin_add_overflow(i, step, &i)) break;  // a huge step: past either end anyway
  }
  if (is_string) return Value::Str(py::Encode(out_chars));
  return object.kind() == Kind::kTuple ? Value::Tuple(std::move(out_items)) : Value::List(std::move(out_items));
}

}  // namespace ember::jinja
