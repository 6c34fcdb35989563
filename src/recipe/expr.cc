#include "recipe/expr.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace ember::recipe {

Value Value::Bool(bool b) {
  Value v;
  v.kind = Kind::kBool;
  v.boolean = b;
  return v;
}
Value Value::Number(double n) {
  Value v;
  v.kind = Kind::kNumber;
  v.number = n;
  return v;
}
Value Value::String(std::string s) {
  Value v;
  v.kind = Kind::kString;
  v.string = std::move(s);
  return v;
}
Value Value::List(std::vector<std::string> l) {
  Value v;
  v.kind = Kind::kList;
  v.list = std::move(l);
  return v;
}

bool Value::operator==(const Value& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::kBool: return boolean == o.boolean;
    case Kind::kNumber: return number == o.number;
    case Kind::kString: return string == o.string;
    case Kind::kList: return list == o.list;
  }
  return false;
}

std::string Value::ToString() const {
  switch (kind) {
    case Kind::kBool: return boolean ? "true" : "false";
    case Kind::kNumber:
      if (number == std::floor(number) && std::fabs(number) < 1e15) return fmt::format("{}", static_cast<int64_t>(number));
      return fmt::format("{:.4g}", number);
    case Kind::kString: return "'" + string + "'";
    case Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < list.size(); ++i) out += (i ? ", '" : "'") + list[i] + "'";
      return out + "]";
    }
  }
  return "?";
}

struct Expr::Node {
  enum class Op { kLiteral, kIdent, kList, kNot, kAnd, kOr, kCompare, kIn, kNotIn, kArith, kCall };
  Op op = Op::kLiteral;
  std::string name;  // identifier, function, or operator spelling
  Value literal;
  std::vector<std::shared_ptr<const Node>> args;
};

namespace {

using NodePtr = std::shared_ptr<const Expr::Node>;
using Op = Expr::Node::Op;

struct Token {
  enum class Kind { kIdent, kNumber, kString, kSymbol, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;
  size_t pos = 0;
};

Expected<std::vector<Token>> Lex(const std::string& s) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    Token t;
    t.pos = i;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_' || s[j] == '.')) ++j;
      t.kind = Token::Kind::kIdent;
      t.text = s.substr(i, j - i);
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.' || s[j] == '_')) ++j;
      t.kind = Token::Kind::kNumber;
      t.text = s.substr(i, j - i);
      t.text.erase(std::remove(t.text.begin(), t.text.end(), '_'), t.text.end());  // 1_048_576
      i = j;
    } else if (c == '\'') {
      const size_t end = s.find('\'', i + 1);
      if (end == std::string::npos) return InvalidArgument(fmt::format("unterminated string at {} in \"{}\"", i, s));
      t.kind = Token::Kind::kString;
      t.text = s.substr(i + 1, end - i - 1);
      i = end + 1;
    } else {
      static const char* kTwo[] = {"==", "!=", "<=", ">="};
      t.kind = Token::Kind::kSymbol;
      t.text = std::string(1, c);
      for (const char* two : kTwo) {
        if (s.compare(i, 2, two) == 0) t.text = two;
      }
      if (t.text.size() == 1 && std::string("()[],<>+-*/").find(c) == std::string::npos) {
        return InvalidArgument(fmt::format("unexpected '{}' at {} in \"{}\"", c, i, s));
      }
      i += t.text.size();
    }
    tokens.push_back(std::move(t));
  }
  Token end;
  end.pos = s.size();
  tokens.push_back(end);
  return tokens;
}

// Recursive descent, one function per precedence level.
class Parser {
 public:
  Parser(const std::string& text, std::vector<Token> tokens) : text_(text), tokens_(std::move(tokens)) {}

  Expected<NodePtr> Parse() {
    EMBER_ASSIGN_OR_RETURN(NodePtr n, Or());
    if (Peek().kind != Token::Kind::kEnd) return Error("end of expression");
    return n;
  }

 private:
  const Token& Peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  bool IsWord(const char* w, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kIdent && Peek(ahead).text == w;
  }
  bool IsSymbol(const char* s) const { return Peek().kind == Token::Kind::kSymbol && Peek().text == s; }
  Status Error(const char* expected) const {
    return InvalidArgument(fmt::format("expected {} at position {} in \"{}\"", expected, Peek().pos, text_));
  }
  static NodePtr Make(Op op, std::string name, std::vector<NodePtr> args) {
    auto n = std::make_shared<Expr::Node>();
    n->op = op;
    n->name = std::move(name);
    n->args = std::move(args);
    return n;
  }

  Expected<NodePtr> Or() {
    EMBER_ASSIGN_OR_RETURN(NodePtr left, And());
    while (IsWord("or")) {
      ++pos_;
      EMBER_ASSIGN_OR_RETURN(NodePtr right, And());
      left = Make(Op::kOr, "or", {left, right});
    }
    return left;
  }
  Expected<NodePtr> And() {
    EMBER_ASSIGN_OR_RETURN(NodePtr left, Not());
    while (IsWord("and")) {
      ++pos_;
      EMBER_ASSIGN_OR_RETURN(NodePtr right, Not());
      left = Make(Op::kAnd, "and", {left, right});
    }
    return left;
  }
  Expected<NodePtr> Not() {
    if (IsWord("not")) {
      ++pos_;
      EMBER_ASSIGN_OR_RETURN(NodePtr inner, Not());
      return Make(Op::kNot, "not", {inner});
    }
    return Compare();
  }
  Expected<NodePtr> Compare() {
    EMBER_ASSIGN_OR_RETURN(NodePtr left, Sum());
    static const char* kOps[] = {"==", "!=", "<", "<=", ">", ">="};
    for (const char* op : kOps) {
      if (IsSymbol(op)) {
        ++pos_;
        EMBER_ASSIGN_OR_RETURN(NodePtr right, Sum());
        return Make(Op::kCompare, op, {left, right});
      }
    }
    if (IsWord("in") || (IsWord("not") && IsWord("in", 1))) {
      const bool negate = IsWord("not");
      pos_ += negate ? 2 : 1;
      EMBER_ASSIGN_OR_RETURN(NodePtr right, Sum());
      return Make(negate ? Op::kNotIn : Op::kIn, negate ? "not in" : "in", {left, right});
    }
    return left;
  }
  Expected<NodePtr> Sum() {
    EMBER_ASSIGN_OR_RETURN(NodePtr left, Product());
    while (IsSymbol("+") || IsSymbol("-")) {
      const std::string op = tokens_[pos_++].text;
      EMBER_ASSIGN_OR_RETURN(NodePtr right, Product());
      left = Make(Op::kArith, op, {left, right});
    }
    return left;
  }
  Expected<NodePtr> Product() {
    EMBER_ASSIGN_OR_RETURN(NodePtr left, Primary());
    while (IsSymbol("*") || IsSymbol("/")) {
      const std::string op = tokens_[pos_++].text;
      EMBER_ASSIGN_OR_RETURN(NodePtr right, Primary());
      left = Make(Op::kArith, op, {left, right});
    }
    return left;
  }
  Expected<NodePtr> Primary() {
    const Token& t = Peek();
    if (t.kind == Token::Kind::kNumber) {
      ++pos_;
      char* end = nullptr;
      const double n = std::strtod(t.text.c_str(), &end);
      if (end == nullptr || *end != '\0') return Error("a number");
      auto node = std::make_shared<Expr::Node>();
      node->literal = Value::Number(n);
      return NodePtr(node);
    }
    if (t.kind == Token::Kind::kString) {
      ++pos_;
      auto node = std::make_shared<Expr::Node>();
      node->literal = Value::String(t.text);
      return NodePtr(node);
    }
    if (t.kind == Token::Kind::kIdent) {
      ++pos_;
      if (t.text == "true" || t.text == "false") {
        auto node = std::make_shared<Expr::Node>();
        node->literal = Value::Bool(t.text == "true");
        return NodePtr(node);
      }
      if (IsSymbol("(")) {
        if (t.text != "min" && t.text != "max") return InvalidArgument(fmt::format("unknown function '{}' in \"{}\"", t.text, text_));
        ++pos_;
        EMBER_ASSIGN_OR_RETURN(NodePtr a, Or());
        if (!IsSymbol(",")) return Error("','");
        ++pos_;
        EMBER_ASSIGN_OR_RETURN(NodePtr b, Or());
        if (!IsSymbol(")")) return Error("')'");
        ++pos_;
        return Make(Op::kCall, t.text, {a, b});
      }
      return Make(Op::kIdent, t.text, {});
    }
    if (IsSymbol("(")) {
      ++pos_;
      EMBER_ASSIGN_OR_RETURN(NodePtr inner, Or());
      if (!IsSymbol(")")) return Error("')'");
      ++pos_;
      return inner;
    }
    if (IsSymbol("[")) {
      ++pos_;
      std::vector<NodePtr> items;
      while (!IsSymbol("]")) {
        if (!items.empty()) {
          if (!IsSymbol(",")) return Error("',' or ']'");
          ++pos_;
        }
        EMBER_ASSIGN_OR_RETURN(NodePtr item, Primary());
        items.push_back(item);
      }
      ++pos_;
      return Make(Op::kList, "[]", std::move(items));
    }
    return Error("a value, identifier, '(' or '['");
  }

  const std::string& text_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

const char* KindName(Value::Kind k) {
  switch (k) {
    case Value::Kind::kBool: return "a boolean";
    case Value::Kind::kNumber: return "a number";
    case Value::Kind::kString: return "a string";
    case Value::Kind::kList: return "a list";
  }
  return "?";
}

Expected<Value> Evaluate(const Expr::Node& n, const Facts& facts, const std::string& text) {
  auto type_error = [&](const char* what, const Value& v) {
    return InvalidArgument(fmt::format("'{}' needs {}, got {} in \"{}\"", n.name, what, KindName(v.kind), text));
  };
  switch (n.op) {
    case Op::kLiteral: return n.literal;
    case Op::kIdent: {
      auto it = facts.find(n.name);
      if (it == facts.end()) return InvalidArgument(fmt::format("unknown fact '{}' in \"{}\"", n.name, text));
      return it->second;
    }
    case Op::kList: {
      std::vector<std::string> items;
      for (const auto& a : n.args) {
        EMBER_ASSIGN_OR_RETURN(Value v, Evaluate(*a, facts, text));
        if (v.kind != Value::Kind::kString) return type_error("strings in a list", v);
        items.push_back(v.string);
      }
      return Value::List(std::move(items));
    }
    case Op::kNot: {
      EMBER_ASSIGN_OR_RETURN(Value v, Evaluate(*n.args[0], facts, text));
      if (v.kind != Value::Kind::kBool) return type_error("a boolean", v);
      return Value::Bool(!v.boolean);
    }
    case Op::kAnd:
    case Op::kOr: {
      EMBER_ASSIGN_OR_RETURN(Value a, Evaluate(*n.args[0], facts, text));
      if (a.kind != Value::Kind::kBool) return type_error("booleans", a);
      // Short-circuit, so `x > 0 and y / x > 2` is safe.
      if (n.op == Op::kAnd && !a.boolean) return Value::Bool(false);
      if (n.op == Op::kOr && a.boolean) return Value::Bool(true);
      EMBER_ASSIGN_OR_RETURN(Value b, Evaluate(*n.args[1], facts, text));
      if (b.kind != Value::Kind::kBool) return type_error("booleans", b);
      return Value::Bool(b.boolean);
    }
    case Op::kCompare: {
      EMBER_ASSIGN_OR_RETURN(Value a, Evaluate(*n.args[0], facts, text));
      EMBER_ASSIGN_OR_RETURN(Value b, Evaluate(*n.args[1], facts, text));
      if (n.name == "==") return Value::Bool(a == b);
      if (n.name == "!=") return Value::Bool(!(a == b));
      if (a.kind != Value::Kind::kNumber) return type_error("numbers", a);
      if (b.kind != Value::Kind::kNumber) return type_error("numbers", b);
      if (n.name == "<") return Value::Bool(a.number < b.number);
      if (n.name == "<=") return Value::Bool(a.number <= b.number);
      if (n.name == ">") return Value::Bool(a.number > b.number);
      return Value::Bool(a.number >= b.number);
    }
    case Op::kIn:
    case Op::kNotIn: {
      EMBER_ASSIGN_OR_RETURN(Value a, Evaluate(*n.args[0], facts, text));
      EMBER_ASSIGN_OR_RETURN(Value b, Evaluate(*n.args[1], facts, text));
      if (a.kind != Value::Kind::kString) return type_error("a string on its left", a);
      if (b.kind != Value::Kind::kList) return type_error("a list on its right", b);
      const bool found = std::find(b.list.begin(), b.list.end(), a.string) != b.list.end();
      return Value::Bool(n.op == Op::kIn ? found : !found);
    }
    case Op::kArith:
    case Op::kCall: {
      EMBER_ASSIGN_OR_RETURN(Value a, Evaluate(*n.args[0], facts, text));
      EMBER_ASSIGN_OR_RETURN(Value b, Evaluate(*n.args[1], facts, text));
      if (a.kind != Value::Kind::kNumber) return type_error("numbers", a);
      if (b.kind != Value::Kind::kNumber) return type_error("numbers", b);
      if (n.name == "+") return Value::Number(a.number + b.number);
      if (n.name == "-") return Value::Number(a.number - b.number);
      if (n.name == "*") return Value::Number(a.number * b.number);
      if (n.name == "min") return Value::Number(std::min(a.number, b.number));
      if (n.name == "max") return Value::Number(std::max(a.number, b.number));
      if (b.number == 0) return InvalidArgument(fmt::format("division by zero in \"{}\"", text));
      return Value::Number(a.number / b.number);
    }
  }
  return Internal("unhandled expression node");
}

void CollectIdentifiers(const Expr::Node& n, std::set<std::string>* out) {
  if (n.op == Op::kIdent) out->insert(n.name);
  for (const auto& a : n.args) CollectIdentifiers(*a, out);
}

}  // namespace

Expected<Expr> Expr::Parse(const std::string& text) {
  EMBER_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(text));
  Parser parser(text, std::move(tokens));
  EMBER_ASSIGN_OR_RETURN(NodePtr root, parser.Parse());
  Expr e;
  e.text_ = text;
  e.root_ = std::move(root);
  return e;
}

Expected<Value> Expr::Eval(const Facts& facts) const { return Evaluate(*root_, facts, text_); }

Expected<bool> Expr::EvalBool(const Facts& facts) const {
  EMBER_ASSIGN_OR_RETURN(Value v, Eval(facts));
  if (v.kind != Value::Kind::kBool) {
    return InvalidArgument(fmt::format("\"{}\" is {}, not a condition", text_, KindName(v.kind)));
  }
  return v.boolean;
}

std::set<std::string> Expr::Identifiers() const {
  std::set<std::string> out;
  CollectIdentifiers(*root_, &out);
  return out;
}

}  // namespace ember::recipe
