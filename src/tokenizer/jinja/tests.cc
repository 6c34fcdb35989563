// Jinja tests (`x is defined`, `n is divisibleby 3`), following jinja2/tests.py. Type tests follow
// Python's isinstance: bool counts as a number, Undefined counts as iterable and callable.
//
// To add a test: write `Expected<bool> Name(Interpreter&, const Value&, CallArgs)` and list it in
// kTests below.
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/pystr.h"

namespace ember::jinja {
namespace {

using Kind = Value::Kind;

// Tests that take no argument.
template <bool (*Pred)(const Value&)>
Expected<bool> Unary(Interpreter&, const Value& in, CallArgs args) {
  EMBER_RETURN_IF_ERROR(BindArgs("test", std::move(args), {}).status());
  return Pred(in);
}

bool IsDefined(const Value& v) { return !v.is_undefined(); }
bool IsUndefined(const Value& v) { return v.is_undefined(); }
bool IsNone(const Value& v) { return v.is_none(); }
bool IsBoolean(const Value& v) { return v.is_bool(); }
bool IsTrue(const Value& v) { return v.is_bool() && v.as_bool(); }
bool IsFalse(const Value& v) { return v.is_bool() && !v.as_bool(); }
bool IsInteger(const Value& v) { return v.is_int(); }
bool IsFloat(const Value& v) { return v.is_float(); }
bool IsNumber(const Value& v) { return v.is_number(); }
bool IsString(const Value& v) { return v.is_string(); }
bool IsMapping(const Value& v) { return v.is_dict(); }
bool IsIterable(const Value& v) {
  return v.is_undefined() || v.is_string() || v.is_sequence() || v.is_dict();
}
// len() and __getitem__: str, list, tuple, dict, and Undefined.
bool IsSequence(const Value& v) {
  return v.is_undefined() || v.is_string() || v.kind() == Kind::kList || v.kind() == Kind::kTuple || v.is_dict();
}
bool IsCallable(const Value& v) { return v.is_function() || v.is_undefined(); }
bool IsEscaped(const Value&) { return false; }  // nothing is Markup with autoescaping off
bool IsLowerStr(const Value& v) { return py::IsLower(ToStr(v)); }
bool IsUpperStr(const Value& v) { return py::IsUpper(ToStr(v)); }

Expected<Value> Modulo(const Value& in, const Value& divisor) {
  return BinaryOp(ast::Binary::Op::kMod, in, divisor);
}

Expected<bool> Odd(Interpreter&, const Value& in, CallArgs args) {
  EMBER_RETURN_IF_ERROR(BindArgs("odd", std::move(args), {}).status());
  EMBER_ASSIGN_OR_RETURN(Value m, Modulo(in, Value::Int(2)));
  return Equals(m, Value::Int(1));
}

Expected<bool> Even(Interpreter&, const Value& in, CallArgs args) {
  EMBER_RETURN_IF_ERROR(BindArgs("even", std::move(args), {}).status());
  EMBER_ASSIGN_OR_RETURN(Value m, Modulo(in, Value::Int(2)));
  return Equals(m, Value::Int(0));
}

Expected<bool> DivisibleBy(Interpreter&, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(auto b, BindArgs("divisibleby", std::move(args), {"num"}));
  if (!b[0]) return InvalidArgument("divisibleby() missing required argument 'num'");
  EMBER_ASSIGN_OR_RETURN(Value m, Modulo(in, *b[0]));
  return Equals(m, Value::Int(0));
}

// Tests with one operand: sameas, in, and the comparison tests.
Expected<Value> Operand(std::string_view name, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(auto b, BindArgs(name, std::move(args), {"other"}));
  if (!b[0]) return InvalidArgument(std::string(name) + "() missing required argument");
  return *b[0];
}

Expected<bool> SameAs(Interpreter&, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Value other, Operand("sameas", std::move(args)));
  // Python identity: singletons and small values compare by value, containers by object.
  if (in.kind() != other.kind()) return false;
  if (in.identity() != nullptr) return in.identity() == other.identity();
  return Equals(in, other);
}

Expected<bool> In(Interpreter&, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Value seq, Operand("in", std::move(args)));
  return Contains(seq, in);
}

template <int kOp>  // 0 ==, 1 !=, 2 <, 3 <=, 4 >, 5 >=
Expected<bool> CompareTest(Interpreter&, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Value other, Operand("comparison", std::move(args)));
  if (kOp == 0) return Equals(in, other);
  if (kOp == 1) return !Equals(in, other);
  EMBER_ASSIGN_OR_RETURN(int c, Compare(in, other));
  return kOp == 2 ? c < 0 : kOp == 3 ? c <= 0 : kOp == 4 ? c > 0 : c >= 0;
}

Expected<bool> FilterTest(Interpreter&, const Value& in, CallArgs args) {
  EMBER_RETURN_IF_ERROR(BindArgs("filter", std::move(args), {}).status());
  return in.is_string() && IsJinjaFilterName(in.as_string());
}

Expected<bool> TestTest(Interpreter&, const Value& in, CallArgs args) {
  EMBER_RETURN_IF_ERROR(BindArgs("test", std::move(args), {}).status());
  return in.is_string() && IsJinjaTestName(in.as_string());
}

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"defined", Unary<IsDefined>},   {"undefined", Unary<IsUndefined>}, {"none", Unary<IsNone>},
    {"boolean", Unary<IsBoolean>},   {"true", Unary<IsTrue>},           {"false", Unary<IsFalse>},
    {"integer", Unary<IsInteger>},   {"float", Unary<IsFloat>},         {"number", Unary<IsNumber>},
    {"string", Unary<IsString>},     {"mapping", Unary<IsMapping>},     {"iterable", Unary<IsIterable>},
    {"sequence", Unary<IsSequence>}, {"callable", Unary<IsCallable>},   {"escaped", Unary<IsEscaped>},
    {"lower", Unary<IsLowerStr>},    {"upper", Unary<IsUpperStr>},      {"odd", Odd},
    {"even", Even},                  {"divisibleby", DivisibleBy},      {"sameas", SameAs},
    {"in", In},                      {"filter", FilterTest},            {"test", TestTest},
    {"==", CompareTest<0>},          {"eq", CompareTest<0>},            {"equalto", CompareTest<0>},
    {"!=", CompareTest<1>},          {"ne", CompareTest<1>},            {"<", CompareTest<2>},
    {"lt", CompareTest<2>},          {"lessthan", CompareTest<2>},      {"<=", CompareTest<3>},
    {"le", CompareTest<3>},          {">", CompareTest<4>},             {"gt", CompareTest<4>},
    {"greaterthan", CompareTest<4>}, {">=", CompareTest<5>},            {"ge", CompareTest<5>},
};

}  // namespace

TestFn FindTest(std::string_view name) {
  for (const TestEntry& e : kTests) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

// Every jinja2 test is implemented, so the known names are exactly the table's.
bool IsJinjaTestName(std::string_view name) { return FindTest(name) != nullptr; }

}  // namespace ember::jinja
