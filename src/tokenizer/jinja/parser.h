// Recursive-descent parser from tokens to the syntax tree, following jinja2's grammar and
// operator precedence (jinja2/parser.py), including its quirks: filters and tests bind tighter
// than arithmetic, `**` is left-associative, and `-x|f` applies f to -x.
//
// Statements: if/elif/else, for (tuple targets, `if` filter, else), set (expression and block
// forms, namespace attributes), macro, call, filter, with, break, continue, and HF's generation
// block. Template inheritance and imports are rejected with an error naming the tag.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"

namespace ember::jinja {

Expected<std::shared_ptr<const ast::Template>> ParseTemplate(std::string_view source);

namespace internal {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}
  Expected<std::shared_ptr<const ast::Template>> Run();

 private:
  // ---- token stream ----
  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Peek(size_t ahead = 1) const;
  void Next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsOp(std::string_view op) const { return Cur().kind == TokenKind::kOperator && Cur().value == op; }
  bool IsName(std::string_view name) const { return Cur().kind == TokenKind::kName && Cur().value == name; }
  bool SkipOp(std::string_view op);
  bool SkipName(std::string_view name);
  Status ExpectOp(std::string_view op);
  Status ExpectBlockEnd(std::string_view tag);
  Expected<std::string> ExpectName(std::string_view what);
  Status Error(const Token& at, const std::string& message) const;
  Status Unexpected(std::string_view expected) const;
  static ast::Pos PosOf(const Token& t) { return {t.line, t.column}; }
  static std::string Describe(const Token& t);

  // ---- statements (parser.cc) ----
  // Parses statements until a block tag whose name is in `end_tags`; returns that name with the
  // stream on the token after it. At end of input it fails naming the unclosed `block`.
  Expected<std::string> ParseBody(ast::Body* body, const std::set<std::string_view>& end_tags,
                                  std::string_view block, const Token& opened_at);
  Status ParseStatement(ast::Body* body, const Token& block_begin);
  Status ParseIf(const Token& tag, ast::Body* body);
  Status ParseFor(const Token& tag, ast::Body* body);
  Status ParseSet(const Token& tag, ast::Body* body);
  Status ParseMacro(const Token& tag, ast::Body* body);
  Status ParseCallBlock(const Token& tag, ast::Body* body);
  Status ParseFilterBlock(const Token& tag, ast::Body* body);
  Status ParseWith(const Token& tag, ast::Body* body);
  Status ParseSignature(ast::Signature* signature);
  Expected<ast::Target> ParseAssignTarget(bool with_namespace, std::string_view end_name);

  // ---- expressions (parser_expr.cc) ----
  Expected<ast::ExprPtr> ParseExpression(bool with_condexpr = true);
  // jinja2's parse_tuple: a bare comma-separated list becomes a tuple. `end_name` is an extra
  // name that ends the list (like "in" after a for target).
  Expected<ast::ExprPtr> ParseTuple(bool with_condexpr = true, bool explicit_parens = false,
                                    std::string_view end_name = {});
  Expected<ast::ExprPtr> ParseCondExpr();
  Expected<ast::ExprPtr> ParseOr();
  Expected<ast::ExprPtr> ParseAnd();
  Expected<ast::ExprPtr> ParseNot();
  Expected<ast::ExprPtr> ParseCompare();
  Expected<ast::ExprPtr> ParseMath1();
  Expected<ast::ExprPtr> ParseConcat();
  Expected<ast::ExprPtr> ParseMath2();
  Expected<ast::ExprPtr> ParsePow();
  Expected<ast::ExprPtr> ParseUnary(bool with_filter = true);
  Expected<ast::ExprPtr> ParsePrimary();
  Expected<ast::ExprPtr> ParsePostfix(ast::ExprPtr node);
  Expected<ast::ExprPtr> ParseFilterExpr(ast::ExprPtr node);
  Expected<ast::ExprPtr> ParseSubscript(ast::ExprPtr node);
  Status ParseArgs(ast::Args* args);
  // One `name(args)` filter; the caller has consumed the `|` if there was one.
  Expected<std::unique_ptr<ast::Filter>> ParseFilterCall(ast::ExprPtr input);
  Expected<ast::ExprPtr> ParseTest(ast::ExprPtr node);
  bool IsTupleEnd(std::string_view end_name) const;

  // Counts recursive descent; deeply nested input is refused instead of exhausting the stack.
  class NestingGuard {
   public:
    explicit NestingGuard(Parser* p) : p_(p) { ++p_->nesting_; }
    ~NestingGuard() { --p_->nesting_; }
    bool too_deep() const { return p_->nesting_ > kMaxNesting; }

   private:
    Parser* p_;
  };
  static constexpr int kMaxNesting = 200;
  Status TooDeep() const { return Error(Cur(), "the template nests too deeply"); }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;  // for break/continue outside loops
};

}  // namespace internal
}  // namespace ember::jinja
