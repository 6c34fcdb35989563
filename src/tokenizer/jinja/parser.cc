// Statement-level parsing and the token-stream helpers; expressions are in parser_expr.cc.
#include "tokenizer/jinja/parser.h"

namespace ember::jinja {
namespace internal {
namespace {

std::string JoinTags(const std::set<std::string_view>& tags) {
  std::string out;
  for (std::string_view t : tags) {
    if (!out.empty()) out += " or ";
    out += '\'';
    out += t;
    out += '\'';
  }
  return out;
}

}  // namespace

const Token& Parser::Peek(size_t ahead) const {
  return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
}

bool Parser::SkipOp(std::string_view op) {
  if (!IsOp(op)) return false;
  Next();
  return true;
}

bool Parser::SkipName(std::string_view name) {
  if (!IsName(name)) return false;
  Next();
  return true;
}

std::string Parser::Describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::kText: return "template text";
    case TokenKind::kVarBegin: return "'{{'";
    case TokenKind::kVarEnd: return "'}}'";
    case TokenKind::kBlockBegin: return "'{%'";
    case TokenKind::kBlockEnd: return "'%}'";
    case TokenKind::kName: return "'" + t.value + "'";
    case TokenKind::kString: return "a string literal";
    case TokenKind::kInt:
    case TokenKind::kFloat: return "the number " + t.value;
    case TokenKind::kOperator: return "'" + t.value + "'";
    case TokenKind::kEof: return "the end of the template";
  }
  return "a token";
}

Status Parser::Error(const Token& at, const std::string& message) const {
  return InvalidArgument("template syntax error at " + Location(at.line, at.column) + ": " + message);
}

Status Parser::Unexpected(std::string_view expected) const {
  return Error(Cur(), "expected " + std::string(expected) + ", got " + Describe(Cur()));
}

Status Parser::ExpectOp(std::string_view op) {
  if (SkipOp(op)) return Status::Ok();
  std::string quoted = "'";
  quoted += op;
  return Unexpected(quoted + "'");
}

Status Parser::ExpectBlockEnd(std::string_view tag) {
  if (Cur().kind == TokenKind::kBlockEnd) {
    Next();
    return Status::Ok();
  }
  return Unexpected("the end of the '" + std::string(tag) + "' tag ('%}')");
}

Expected<std::string> Parser::ExpectName(std::string_view what) {
  if (Cur().kind != TokenKind::kName) return Unexpected(what);
  std::string name = Cur().value;
  Next();
  return name;
}

Expected<std::shared_ptr<const ast::Template>> Parser::Run() {
  auto tmpl = std::make_shared<ast::Template>();
  EMBER_ASSIGN_OR_RETURN(std::string end, ParseBody(&tmpl->body, {}, "", Cur()));
  (void)end;
  return std::shared_ptr<const ast::Template>(std::move(tmpl));
}

Expected<std::string> Parser::ParseBody(ast::Body* body, const std::set<std::string_view>& end_tags,
                                        std::string_view block, const Token& opened_at) {
  NestingGuard guard(this);
  if (guard.too_deep()) return TooDeep();
  while (true) {
    const Token& t = Cur();
    switch (t.kind) {
      case TokenKind::kText:
        body->push_back(std::make_unique<ast::Text>(PosOf(t), t.value));
        Next();
        break;
      case TokenKind::kVarBegin: {
        Next();
        EMBER_ASSIGN_OR_RETURN(ast::ExprPtr expr, ParseTuple());
        if (Cur().kind != TokenKind::kVarEnd) return Unexpected("the end of the expression ('}}')");
        Next();
        body->push_back(std::make_unique<ast::Output>(PosOf(t), std::move(expr)));
        break;
      }
      case TokenKind::kBlockBegin: {
        const Token& name = Peek();
        if (name.kind == TokenKind::kName && end_tags.count(name.value) > 0) {
          Next();
          std::string found = Cur().value;
          Next();
          return found;
        }
        const Token& block_begin = t;
        Next();
        EMBER_RETURN_IF_ERROR(ParseStatement(body, block_begin));
        break;
      }
      case TokenKind::kEof:
        if (end_tags.empty()) return std::string();
      {
        std::string message = "unexpected end of template: the '";
        message += block;
        message += "' block opened at " + Location(opened_at.line, opened_at.column);
        message += " is never closed (expected " + JoinTags(end_tags);
        return Error(t, message + ")");
      }
      default:
        return Error(t, "unexpected " + Describe(t));
    }
  }
}

Status Parser::ParseStatement(ast::Body* body, const Token& block_begin) {
  if (Cur().kind != TokenKind::kName) return Unexpected("a tag name after '{%'");
  // The tag's name, positioned at its "{%" so that messages point at the start of the tag.
  Token tag = Cur();
  tag.line = block_begin.line;
  tag.column = block_begin.column;
  const std::string& name = tag.value;
  if (name == "if") return ParseIf(tag, body);
  if (name == "for") return ParseFor(tag, body);
  if (name == "set") return ParseSet(tag, body);
  if (name == "macro") return ParseMacro(tag, body);
  if (name == "call") return ParseCallBlock(tag, body);
  if (name == "filter") return ParseFilterBlock(tag, body);
  if (name == "with") return ParseWith(tag, body);
  if (name == "break" || name == "continue") {
    if (loop_depth_ == 0) return Error(tag, "'" + name + "' outside of a for loop");
    Next();
    EMBER_RETURN_IF_ERROR(ExpectBlockEnd(name));
    if (name == "break") {
      body->push_back(std::make_unique<ast::Break>(PosOf(tag)));
    } else {
      body->push_back(std::make_unique<ast::Continue>(PosOf(tag)));
    }
    return Status::Ok();
  }
  if (name == "print") {
    Next();
    EMBER_ASSIGN_OR_RETURN(ast::ExprPtr expr, ParseTuple());
    EMBER_RETURN_IF_ERROR(ExpectBlockEnd(name));
    body->push_back(std::make_unique<ast::Output>(PosOf(tag), std::move(expr)));
    return Status::Ok();
  }
  if (name == "generation") {
    // HF's AssistantTracker extension: the body renders unchanged, in a scope of its own.
    Next();
    EMBER_RETURN_IF_ERROR(ExpectBlockEnd(name));
    auto scope = std::make_unique<ast::Scope>(PosOf(tag));
    EMBER_RETURN_IF_ERROR(ParseBody(&scope->body, {"endgeneration"}, name, tag).status());
    EMBER_RETURN_IF_ERROR(ExpectBlockEnd("endgeneration"));
    body->push_back(std::move(scope));
    return Status::Ok();
  }
  if (name == "block" || name == "extends" || name == "include" || name == "import" ||
      name == "from" || name == "autoescape") {
    return Unimplemented("template syntax error at " + Location(tag.line, tag.column) + ": '{% " +
                         name + " %}' is not supported: chat templates are rendered standalone, "
                         "without template inheritance, includes or imports");
  }
  return Error(tag, "unknown or misplaced tag '" + name + "'");
}

Status Parser::ParseIf(const Token& tag, ast::Body* body) {
  Next();
  auto node = std::make_unique<ast::If>(PosOf(tag));
  EMBER_ASSIGN_OR_RETURN(ast::ExprPtr cond, ParseTuple(/*with_condexpr=*/false));
  EMBER_RETURN_IF_ERROR(ExpectBlockEnd("if"));
  while (true) {
    node->branches.emplace_back(std::move(cond), ast::Body());
    EMBER_ASSIGN_OR_RETURN(std::string end,
                           ParseBody(&node->branches.back().second, {"elif", "else", "endif"}, "if", tag));
    if (end == "elif") {
      EMBER_ASSIGN_OR_RETURN(cond, ParseTuple(/*with_condexpr=*/false));
      EMBER_RETURN_IF_ERROR(ExpectBlockEnd("elif"));
      continue;
    }
    EMBER_RETURN_IF_ERROR(ExpectBlockEnd(end));
    if (end == "else") {
      EMBER_RETURN_IF_ERROR(ParseBody(&node->else_body, {"endif"}, "if", tag).status());
      EMBER_RETURN_IF_ERROR(ExpectBlockEnd("endif"));
    }
    break;
  }
  body->push_back(std::move(node));
  return Status::Ok();
}

Status Parser::ParseFor(const Token& tag, ast::Body* body) {
  Next();
  auto node = std::make_unique<ast::For>(PosOf(tag));
  EMBER_ASSIGN_OR_RETURN(node->target, ParseAssignTarget(false, "in"));
  if (!SkipName("in")) return Unexpected("'in' in the for loop");
  EMBER_ASSIGN_OR_RETURN(node->iter, ParseTuple(/*with_condexpr=*/false, false, "recursive"));
  if (SkipName("if")) {
    EMBER_ASSIGN_OR_RETURN(node->filter, ParseExpression());
  }
  if (IsName("recursive")) {
    return Unimplemented("template syntax error at " + Location(Cur().line, Cur().column) +
                         ": recursive for loops are not supported");
  }
  EMBER_RETURN_IF_ERROR(ExpectBlockEnd("for"));
  ++loop_depth_;
  auto end = ParseBody(&node->body, {"endfor", "else"}, "for", tag);
  --loop_depth_;
  EMBER_RETURN_IF_ERROR(end.status());
  EMBER_RETURN_IF_ERROR(ExpectBlockEnd(*end));
  if (*end == "else") {
    EMBER_RETURN_IF_ERROR(ParseBody(&node->else_body, {"endfor"}, "for", tag).status());
    EMBER_RETURN_IF_ERROR(ExpectBlockEnd("endfor"));
  }
  body->push_back(std::move(node));
  return Status::Ok();
}

Status Parser::ParseSet(const Token& tag, ast::Body* body) {
  Next();
  EMBER_ASSIGN_OR_RETURN(ast::Target target, ParseAssignTarget(true, ""));
  if (SkipOp("=")) {
    EMBER_ASSIGN_OR_RETURN(ast::ExprPtr value, ParseTuple());
    EMBER_RETURN_IF_ERROR(ExpectBlockEnd("set"));
    body->push_back(std::make_unique<ast::Set>(PosOf(tag), std::move(target), std::move(value)));
    return Status::Ok();
  }
  auto node = std::make_unique<ast::SetBlock>(PosOf(tag), std::move(target));
  while (SkipOp("|")) {
    EMBER_ASSIGN_OR_RETURN(auto filter, ParseFilterCall(nullptr));
    node->filters.push_back(std::move(filter));
  }
  EMBER_RETURN_IF_ERROR(ExpectBlockEnd("set"));
  EMBER_RETURN_IF_ERROR(ParseBody(&node->body, {"endset"}, "set", tag).status());
  EMBER_RETURN_IF_ERROR(ExpectBlockEnd("endset"));
  body->push_back(std::move(node));
  return Status::Ok();
}

Status Parser::ParseSignature(ast::Signature* signature) {
  EMBER_RETURN_IF_ERROR(ExpectOp("("));
  bool any_default = false;
  while (!IsOp(")")) {
    if (!signature->params.empty()) EMBER_RETURN_IF_ERROR(ExpectOp(","));
    EMBER_ASSIGN_OR_RETURN(std::string param, ExpectName("a parameter name"));
    ast::ExprPtr default_value;
    if (SkipOp("=")) {
      EMBER_ASSIGN_OR_RETURN(default_value, ParseExpression());
      any_default = true;
    } else if (any_default) {
      return Error(Cur(), "non-default argument follows default argument");
    }
    signature->params.push_back(std::move(param));
    signature->defaults.push_back(std::move(default_value));
  }
  Next();
  return Status::Ok();
}

namespace {

// Whether tokens [begin, end) mention `varargs`, `kwargs` or `caller`, which decides whether a
// macro accepts extra arguments, as jinja2 decides from the names its body uses.
void ScanSpecialNames(const std::vector<Token>& tokens, size_t begin, size_t end, ast::Macro* macro) {
  for (size_t i = begin; i < end && i < tokens.size(); ++i) {
    if (tokens[i].kind != TokenKind::kName) continue;
    macro->uses_varargs = macro->uses_varargs || tokens[i].value == "varargs";
    macro->uses_kwargs = macro->uses_kwargs || tokens[i].value == "kwargs";
    macro->uses_caller = macro->uses_caller || tokens[i].value == "caller";
  }
}

}  // namespace

Status Parser::ParseMacro(const Token& tag, ast::Body* body) {
  Next();
  EMBER_ASSIGN_OR_RETURN(std::string name, ExpectName("a macro name"));
  auto node = std::make_unique<ast::Macro>(PosOf(tag), std::move(name));
  EMBER_RETURN_IF_ERROR(ParseSignature(&node->signature));
  EMBER_RETURN_IF_ERROR(ExpectBlockEnd("macro"));
  const size_t body_begin = pos_;
  const int saved_depth = loop_depth_;
  loop_depth_ = 0;
  auto end = ParseBody(&node->body, {"endmacro"}, "macro", tag);
  loop_depth_ = saved_depth;
  EMBER_RETURN_IF_ERROR(end.status());
  ScanSpecialNames(tokens_, body_begin, pos_, node.get());
  EMBER_RETURN_IF_ERROR(ExpectBlockEnd("endmacro"));
  body->push_back(std::move(node));
  return Status::Ok();
}

Status Parser::ParseCallBlock(const Token& tag, ast::Body* body) {
  Next();
  auto node = std::make_unique<ast::CallBlock>(PosOf(tag));
  node->caller = std::make_shared<ast::Macro>(PosOf(tag), "caller");
  if (IsOp("(")) EMBER_RETURN_IF_ERROR(ParseSignature(&node->caller->signature));
  const Token& call_at = Cur();
  EMBER_ASSIGN_OR_RETURN(ast::ExprPtr call, ParseExpression());
  if (call->kind != ast::Expr::Kind::kCall) return Error(call_at, "expected a call after 'call'");
  node->call.reset(static_cast<ast::Call*>(call.release()));
  EMBER_RETURN_IF_ERROR(ExpectBlockEnd("call"));
  const size_t body_begin = pos_;
  const int saved_depth = loop_depth_;
  loop_depth_ = 0;
  auto end = ParseBody(&node->caller->body, {"endcall"}, "call", tag);
  loop_depth_ = saved_depth;
  EMBER_RETURN_IF_ERROR(end.status());
  ScanSpecialNames(tokens_, body_begin, pos_, node->caller.get());
  EMBER_RETURN_IF_ERROR(ExpectBlockEnd("endcall"));
  body->push_back(std::move(node));
  return Status::Ok();
}

Status Parser::ParseFilterBlock(const Token& tag, ast::Body* body) {
  Next();
  auto node = std::make_unique<ast::FilterBlock>(PosOf(tag));
  do {
    EMBER_ASSIGN_OR_RETURN(auto filter, ParseFilterCall(nullptr));
    node->filters.push_back(std::move(filter));
  } while (SkipOp("|"));
  EMBER_RETURN_IF_ERROR(ExpectBlockEnd("filter"));
  EMBER_RETURN_IF_ERROR(ParseBody(&node->body, {"endfilter"}, "filter", tag).status());
  EMBER_RETURN_IF_ERROR(ExpectBlockEnd("endfilter"));
  body->push_back(std::move(node));
  return Status::Ok();
}

Status Parser::ParseWith(const Token& tag, ast::Body* body) {
  Next();
  auto node = std::make_unique<ast::With>(PosOf(tag));
  while (Cur().kind != TokenKind::kBlockEnd) {
    if (!node->assignments.empty()) EMBER_RETURN_IF_ERROR(ExpectOp(","));
    EMBER_ASSIGN_OR_RETURN(ast::Target target, ParseAssignTarget(false, ""));
    EMBER_RETURN_IF_ERROR(ExpectOp("="));
    EMBER_ASSIGN_OR_RETURN(ast::ExprPtr value, ParseExpression());
    node->assignments.emplace_back(std::move(target), std::move(value));
  }
  Next();
  EMBER_RETURN_IF_ERROR(ParseBody(&node->body, {"endwith"}, "with", tag).status());
  EMBER_RETURN_IF_ERROR(ExpectBlockEnd("endwith"));
  body->push_back(std::move(node));
  return Status::Ok();
}

Expected<ast::Target> Parser::ParseAssignTarget(bool with_namespace, std::string_view end_name) {
  ast::Target target;
  target.pos = PosOf(Cur());
  if (with_namespace && Cur().kind == TokenKind::kName && Peek().kind == TokenKind::kOperator &&
      Peek().value == ".") {
    target.kind = ast::Target::Kind::kNamespaceAttr;
    target.name = Cur().value;
    Next();
    Next();
    EMBER_ASSIGN_OR_RETURN(target.attr, ExpectName("an attribute name"));
    return target;
  }
  std::vector<ast::Target> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) EMBER_RETURN_IF_ERROR(ExpectOp(","));
    if (IsTupleEnd(end_name)) break;
    if (SkipOp("(")) {
      EMBER_ASSIGN_OR_RETURN(ast::Target inner, ParseAssignTarget(false, ""));
      EMBER_RETURN_IF_ERROR(ExpectOp(")"));
      items.push_back(std::move(inner));
    } else {
      const Token& t = Cur();
      if (t.kind != TokenKind::kName || t.value == "true" || t.value == "false" || t.value == "none" ||
          t.value == "True" || t.value == "False" || t.value == "None") {
        return Error(t, "can't assign to " + Describe(t));
      }
      ast::Target name;
      name.pos = PosOf(t);
      name.name = t.value;
      items.push_back(std::move(name));
      Next();
    }
    if (!IsOp(",")) break;
    is_tuple = true;
  }
  if (items.empty()) return Unexpected("an assignment target");
  if (!is_tuple) return std::move(items[0]);
  target.kind = ast::Target::Kind::kTuple;
  target.items = std::move(items);
  return target;
}

bool Parser::IsTupleEnd(std::string_view end_name) const {
  const Token& t = Cur();
  if (t.kind == TokenKind::kVarEnd || t.kind == TokenKind::kBlockEnd || t.kind == TokenKind::kEof) return true;
  if (IsOp(")")) return true;
  return !end_name.empty() && IsName(end_name);
}

}  // namespace internal

Expected<std::shared_ptr<const ast::Template>> ParseTemplate(std::string_view source) {
  EMBER_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source));
  return internal::Parser(std::move(tokens)).Run();
}

}  // namespace ember::jinja
