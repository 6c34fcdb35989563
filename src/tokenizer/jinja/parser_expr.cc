// Expression parsing, one function per jinja2 precedence level (jinja2/parser.py):
//   condexpr > or > and > not > compare > + - > ~ > * / // % > ** > unary/postfix/filters/tests
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/parser.h"

namespace ember::jinja::internal {

using ast::ExprPtr;

Expected<ExprPtr> Parser::ParseExpression(bool with_condexpr) {
  return with_condexpr ? ParseCondExpr() : ParseOr();
}

Expected<ExprPtr> Parser::ParseTuple(bool with_condexpr, bool explicit_parens, std::string_view end_name) {
  const ast::Pos pos = PosOf(Cur());
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) EMBER_RETURN_IF_ERROR(ExpectOp(","));
    if (IsTupleEnd(end_name)) break;
    EMBER_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condexpr));
    items.push_back(std::move(item));
    if (!IsOp(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) return Unexpected("an expression");
  }
  auto tuple = std::make_unique<ast::ListExpr>(pos, /*tuple=*/true);
  tuple->items = std::move(items);
  return ExprPtr(std::move(tuple));
}

Expected<ExprPtr> Parser::ParseCondExpr() {
  NestingGuard guard(this);
  if (guard.too_deep()) return TooDeep();
  EMBER_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
  while (IsName("if")) {
    const ast::Pos pos = PosOf(Cur());
    Next();
    EMBER_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
    ExprPtr otherwise;
    if (SkipName("else")) {
      EMBER_ASSIGN_OR_RETURN(otherwise, ParseCondExpr());
    }
    expr = std::make_unique<ast::CondExpr>(pos, std::move(cond), std::move(expr), std::move(otherwise));
  }
  return expr;
}

Expected<ExprPtr> Parser::ParseOr() {
  EMBER_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  while (IsName("or")) {
    const ast::Pos pos = PosOf(Cur());
    Next();
    EMBER_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
    left = std::make_unique<ast::Binary>(pos, ast::Binary::Op::kOr, std::move(left), std::move(right));
  }
  return left;
}

Expected<ExprPtr> Parser::ParseAnd() {
  EMBER_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  while (IsName("and")) {
    const ast::Pos pos = PosOf(Cur());
    Next();
    EMBER_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
    left = std::make_unique<ast::Binary>(pos, ast::Binary::Op::kAnd, std::move(left), std::move(right));
  }
  return left;
}

Expected<ExprPtr> Parser::ParseNot() {
  NestingGuard guard(this);
  if (guard.too_deep()) return TooDeep();
  if (IsName("not")) {
    const ast::Pos pos = PosOf(Cur());
    Next();
    EMBER_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
    return ExprPtr(std::make_unique<ast::Unary>(pos, ast::Unary::Op::kNot, std::move(operand)));
  }
  return ParseCompare();
}

Expected<ExprPtr> Parser::ParseCompare() {
  const ast::Pos pos = PosOf(Cur());
  EMBER_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  std::unique_ptr<ast::Compare> cmp;
  while (true) {
    using Op = ast::Compare::Op;
    Op op;
    if (IsOp("==")) {
      op = Op::kEq;
    } else if (IsOp("!=")) {
      op = Op::kNe;
    } else if (IsOp("<")) {
      op = Op::kLt;
    } else if (IsOp("<=")) {
      op = Op::kLe;
    } else if (IsOp(">")) {
      op = Op::kGt;
    } else if (IsOp(">=")) {
      op = Op::kGe;
    } else if (IsName("in")) {
      op = Op::kIn;
    } else if (IsName("not") && Peek().kind == TokenKind::kName && Peek().value == "in") {
      Next();
      op = Op::kNotIn;
    } else {
      break;
    }
    Next();
    EMBER_ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
    if (!cmp) cmp = std::make_unique<ast::Compare>(pos, std::move(first));
    cmp->rest.emplace_back(op, std::move(operand));
  }
  if (!cmp) return first;
  return ExprPtr(std::move(cmp));
}

Expected<ExprPtr> Parser::ParseMath1() {
  EMBER_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
  while (IsOp("+") || IsOp("-")) {
    const ast::Pos pos = PosOf(Cur());
    const auto op = IsOp("+") ? ast::Binary::Op::kAdd : ast::Binary::Op::kSub;
    Next();
    EMBER_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
    left = std::make_unique<ast::Binary>(pos, op, std::move(left), std::move(right));
  }
  return left;
}

Expected<ExprPtr> Parser::ParseConcat() {
  EMBER_ASSIGN_OR_RETURN(ExprPtr left, ParseMath2());
  while (IsOp("~")) {
    const ast::Pos pos = PosOf(Cur());
    Next();
    EMBER_ASSIGN_OR_RETURN(ExprPtr right, ParseMath2());
    left = std::make_unique<ast::Binary>(pos, ast::Binary::Op::kConcat, std::move(left), std::move(right));
  }
  return left;
}

Expected<ExprPtr> Parser::ParseMath2() {
  EMBER_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    const ast::Pos pos = PosOf(Cur());
    const std::string op_text = Cur().value;
    const auto op = op_text == "*"    ? ast::Binary::Op::kMul
                    : op_text == "/"  ? ast::Binary::Op::kDiv
                    : op_text == "//" ? ast::Binary::Op::kFloorDiv
                                      : ast::Binary::Op::kMod;
    Next();
    EMBER_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
    left = std::make_unique<ast::Binary>(pos, op, std::move(left), std::move(right));
  }
  return left;
}

Expected<ExprPtr> Parser::ParsePow() {
  EMBER_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary());
  while (IsOp("**")) {
    const ast::Pos pos = PosOf(Cur());
    Next();
    EMBER_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary());
    left = std::make_unique<ast::Binary>(pos, ast::Binary::Op::kPow, std::move(left), std::move(right));
  }
  return left;
}

Expected<ExprPtr> Parser::ParseUnary(bool with_filter) {
  NestingGuard guard(this);
  if (guard.too_deep()) return TooDeep();
  const ast::Pos pos = PosOf(Cur());
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    const auto op = IsOp("-") ? ast::Unary::Op::kNeg : ast::Unary::Op::kPos;
    Next();
    EMBER_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
    node = std::make_unique<ast::Unary>(pos, op, std::move(operand));
  } else {
    EMBER_ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  EMBER_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    EMBER_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

Expected<ExprPtr> Parser::ParsePrimary() {
  NestingGuard guard(this);
  if (guard.too_deep()) return TooDeep();
  const Token& t = Cur();
  const ast::Pos pos = PosOf(t);
  switch (t.kind) {
    case TokenKind::kName: {
      const std::string& n = t.value;
      ExprPtr node;
      if (n == "true" || n == "True") {
        node = std::make_unique<ast::Literal>(pos, Value::Bool(true));
      } else if (n == "false" || n == "False") {
        node = std::make_unique<ast::Literal>(pos, Value::Bool(false));
      } else if (n == "none" || n == "None") {
        node = std::make_unique<ast::Literal>(pos, Value::None());
      } else {
        node = std::make_unique<ast::Name>(pos, n);
      }
      Next();
      return node;
    }
    case TokenKind::kString: {
      // Adjacent literals concatenate, as in Python.
      std::string s;
      while (Cur().kind == TokenKind::kString) {
        s += Cur().value;
        Next();
      }
      return ExprPtr(std::make_unique<ast::Literal>(pos, Value::Str(std::move(s))));
    }
    case TokenKind::kInt: {
      const int64_t v = t.int_value;
      Next();
      return ExprPtr(std::make_unique<ast::Literal>(pos, Value::Int(v)));
    }
    case TokenKind::kFloat: {
      const double v = t.float_value;
      Next();
      return ExprPtr(std::make_unique<ast::Literal>(pos, Value::Float(v)));
    }
    default:
      break;
  }
  if (SkipOp("(")) {
    EMBER_ASSIGN_OR_RETURN(ExprPtr inner, ParseTuple(true, /*explicit_parens=*/true));
    EMBER_RETURN_IF_ERROR(ExpectOp(")"));
    return inner;
  }
  if (SkipOp("[")) {
    auto list = std::make_unique<ast::ListExpr>(pos, /*tuple=*/false);
    while (!IsOp("]")) {
      if (!list->items.empty()) EMBER_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("]")) break;
      EMBER_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
      list->items.push_back(std::move(item));
    }
    Next();
    return ExprPtr(std::move(list));
  }
  if (SkipOp("{")) {
    auto dict = std::make_unique<ast::DictExpr>(pos);
    while (!IsOp("}")) {
      if (!dict->items.empty()) EMBER_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("}")) break;
      EMBER_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
      EMBER_RETURN_IF_ERROR(ExpectOp(":"));
      EMBER_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      dict->items.emplace_back(std::move(key), std::move(value));
    }
    Next();
    return ExprPtr(std::move(dict));
  }
  return Unexpected("an expression");
}

Expected<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".") || IsOp("[")) {
      EMBER_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp("(")) {
      auto call = std::make_unique<ast::Call>(node->pos, std::move(node));
      EMBER_RETURN_IF_ERROR(ParseArgs(&call->args));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

Expected<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (SkipOp("|")) {
      EMBER_ASSIGN_OR_RETURN(auto filter, ParseFilterCall(std::move(node)));
      node = std::move(filter);
    } else if (IsName("is")) {
      EMBER_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (IsOp("(")) {
      auto call = std::make_unique<ast::Call>(node->pos, std::move(node));
      EMBER_RETURN_IF_ERROR(ParseArgs(&call->args));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

Expected<ExprPtr> Parser::ParseSubscript(ExprPtr node) {
  const ast::Pos pos = node->pos;
  if (SkipOp(".")) {
    const Token& t = Cur();
    if (t.kind == TokenKind::kName) {
      std::string attr = t.value;
      Next();
      return ExprPtr(std::make_unique<ast::GetAttr>(pos, std::move(node), std::move(attr)));
    }
    if (t.kind == TokenKind::kInt) {
      auto index = std::make_unique<ast::Literal>(PosOf(t), Value::Int(t.int_value));
      Next();
      return ExprPtr(std::make_unique<ast::GetItem>(pos, std::move(node), std::move(index)));
    }
    return Unexpected("an attribute name after '.'");
  }
  EMBER_RETURN_IF_ERROR(ExpectOp("["));
  // jinja2 allows a[x, y] (a tuple index) and a[start:stop:step].
  std::vector<ExprPtr> args;
  while (!IsOp("]")) {
    if (!args.empty()) EMBER_RETURN_IF_ERROR(ExpectOp(","));
    const ast::Pos arg_pos = PosOf(Cur());
    ExprPtr start;
    if (!IsOp(":")) {
      EMBER_ASSIGN_OR_RETURN(start, ParseExpression());
      if (!IsOp(":")) {
        args.push_back(std::move(start));
        continue;
      }
    }
    auto slice = std::make_unique<ast::Slice>(arg_pos, nullptr);
    slice->start = std::move(start);
    Next();  // ':'
    if (!IsOp("]") && !IsOp(",") && !IsOp(":")) {
      EMBER_ASSIGN_OR_RETURN(slice->stop, ParseExpression());
    }
    if (SkipOp(":") && !IsOp("]") && !IsOp(",")) {
      EMBER_ASSIGN_OR_RETURN(slice->step, ParseExpression());
    }
    args.push_back(std::move(slice));
  }
  Next();
  if (args.size() == 1 && args[0]->kind == ast::Expr::Kind::kSlice) {
    auto* slice = static_cast<ast::Slice*>(args[0].get());
    slice->object = std::move(node);
    slice->pos = pos;
    return std::move(args[0]);
  }
  for (const ExprPtr& arg : args) {
    if (arg->kind == ast::Expr::Kind::kSlice) {
      return Error(Cur(), "slices inside a tuple subscript are not supported");
    }
  }
  if (args.empty()) return Unexpected("a subscript");
  ExprPtr index;
  if (args.size() == 1) {
    index = std::move(args[0]);
  } else {
    auto tuple = std::make_unique<ast::ListExpr>(pos, /*tuple=*/true);
    tuple->items = std::move(args);
    index = std::move(tuple);
  }
  return ExprPtr(std::make_unique<ast::GetItem>(pos, std::move(node), std::move(index)));
}

Status Parser::ParseArgs(ast::Args* args) {
  EMBER_RETURN_IF_ERROR(ExpectOp("("));
  bool first = true;
  while (!IsOp(")")) {
    if (!first) {
      EMBER_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
    }
    first = false;
    if (SkipOp("*")) {
      EMBER_ASSIGN_OR_RETURN(args->star, ParseExpression());
    } else if (SkipOp("**")) {
      EMBER_ASSIGN_OR_RETURN(args->double_star, ParseExpression());
    } else if (Cur().kind == TokenKind::kName && Peek().kind == TokenKind::kOperator && Peek().value == "=") {
      std::string key = Cur().value;
      Next();
      Next();
      EMBER_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      args->keyword.emplace_back(std::move(key), std::move(value));
    } else {
      if (!args->keyword.empty() || args->star || args->double_star) {
        return Error(Cur(), "positional argument follows keyword argument");
      }
      EMBER_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      args->positional.push_back(std::move(value));
    }
  }
  Next();
  return Status::Ok();
}

Expected<std::unique_ptr<ast::Filter>> Parser::ParseFilterCall(ExprPtr input) {
  const Token name_at = Cur();
  EMBER_ASSIGN_OR_RETURN(std::string name, ExpectName("a filter name"));
  while (SkipOp(".")) {
    EMBER_ASSIGN_OR_RETURN(std::string part, ExpectName("a filter name"));
    name += "." + part;
  }
  if (!IsJinjaFilterName(name)) return Error(name_at, "no filter named '" + name + "'");
  auto filter = std::make_unique<ast::Filter>(PosOf(name_at), std::move(input), std::move(name));
  if (IsOp("(")) EMBER_RETURN_IF_ERROR(ParseArgs(&filter->args));
  return filter;
}

Expected<ExprPtr> Parser::ParseTest(ExprPtr node) {
  Next();  // 'is'
  const bool negated = SkipName("not");
  const Token name_at = Cur();
  EMBER_ASSIGN_OR_RETURN(std::string name, ExpectName("a test name"));
  while (SkipOp(".")) {
    EMBER_ASSIGN_OR_RETURN(std::string part, ExpectName("a test name"));
    name += "." + part;
  }
  if (!IsJinjaTestName(name)) return Error(name_at, "no test named '" + name + "'");
  auto test = std::make_unique<ast::Test>(PosOf(name_at), std::move(node), std::move(name));
  test->negated = negated;
  const Token& t = Cur();
  const bool bare_arg =
      t.kind == TokenKind::kString || t.kind == TokenKind::kInt || t.kind == TokenKind::kFloat ||
      (t.kind == TokenKind::kName && t.value != "else" && t.value != "or" && t.value != "and") ||
      IsOp("[") || IsOp("{");
  if (IsOp("(")) {
    EMBER_RETURN_IF_ERROR(ParseArgs(&test->args));
  } else if (bare_arg) {
    // `x is divisibleby 3`: one argument without parentheses.
    if (IsName("is")) return Error(t, "you cannot chain multiple tests with 'is'");
    EMBER_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    EMBER_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    test->args.positional.push_back(std::move(arg));
  }
  return ExprPtr(std::move(test));
}

}  // namespace ember::jinja::internal
