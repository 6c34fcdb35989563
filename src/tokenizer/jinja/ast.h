// Syntax tree of a parsed template. Nodes mirror jinja2's (jinja2.nodes) closely enough that the
// evaluator can follow jinja2's semantics node by node; each carries its source position so that
// render errors can point at the offending expression.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace ember::jinja::ast {

struct Pos {
  int line = 0;
  int column = 0;
};

// ---- Expressions ----

struct Expr {
  enum class Kind {
    kLiteral, kName, kList, kDict, kGetAttr, kGetItem, kSlice, kCall, kFilter, kTest, kUnary,
    kBinary, kCompare, kCondExpr,
  };
  Expr(Kind k, Pos p) : kind(k), pos(p) {}
  virtual ~Expr() = default;
  Kind kind;
  Pos pos;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Literal : Expr {
  Literal(Pos p, Value v) : Expr(Kind::kLiteral, p), value(std::move(v)) {}
  Value value;
};

struct Name : Expr {
  Name(Pos p, std::string n) : Expr(Kind::kName, p), name(std::move(n)) {}
  std::string name;
};

// [a, b] or (a, b).
struct ListExpr : Expr {
  ListExpr(Pos p, bool t) : Expr(Kind::kList, p), tuple(t) {}
  bool tuple;
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(Pos p) : Expr(Kind::kDict, p) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

// obj.attr
struct GetAttr : Expr {
  GetAttr(Pos p, ExprPtr o, std::string a) : Expr(Kind::kGetAttr, p), object(std::move(o)), attr(std::move(a)) {}
  ExprPtr object;
  std::string attr;
};

// obj[index]
struct GetItem : Expr {
  GetItem(Pos p, ExprPtr o, ExprPtr i) : Expr(Kind::kGetItem, p), object(std::move(o)), index(std::move(i)) {}
  ExprPtr object;
  ExprPtr index;
};

// obj[start:stop:step]; absent parts are null.
struct Slice : Expr {
  Slice(Pos p, ExprPtr o) : Expr(Kind::kSlice, p), object(std::move(o)) {}
  ExprPtr object, start, stop, step;
};

struct Args {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star;         // *args
  ExprPtr double_star;  // **kwargs
};

struct Call : Expr {
  Call(Pos p, ExprPtr c) : Expr(Kind::kCall, p), callee(std::move(c)) {}
  ExprPtr callee;
  Args args;
};

// input | name(args). `input` is null for the filters of a filter block or block set, which apply
// to the rendered body.
struct Filter : Expr {
  Filter(Pos p, ExprPtr in, std::string n) : Expr(Kind::kFilter, p), input(std::move(in)), name(std::move(n)) {}
  ExprPtr input;
  std::string name;
  Args args;
};

// input is [not] name(args)
struct Test : Expr {
  Test(Pos p, ExprPtr in, std::string n) : Expr(Kind::kTest, p), input(std::move(in)), name(std::move(n)) {}
  ExprPtr input;
  std::string name;
  Args args;
  bool negated = false;
};

struct Unary : Expr {
  enum class Op { kNeg, kPos, kNot };
  Unary(Pos p, Op o, ExprPtr e) : Expr(Kind::kUnary, p), op(o), operand(std::move(e)) {}
  Op op;
  ExprPtr operand;
};

struct Binary : Expr {
  enum class Op { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat, kAnd, kOr };
  Binary(Pos p, Op o, ExprPtr l, ExprPtr r)
      : Expr(Kind::kBinary, p), op(o), left(std::move(l)), right(std::move(r)) {}
  Op op;
  ExprPtr left, right;
};

// a < b <= c: Python's chained comparison.
struct Compare : Expr {
  enum class Op { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };
  Compare(Pos p, ExprPtr f) : Expr(Kind::kCompare, p), first(std::move(f)) {}
  ExprPtr first;
  std::vector<std::pair<Op, ExprPtr>> rest;
};

// then if cond else otherwise; `otherwise` may be null (the result is then Undefined).
struct CondExpr : Expr {
  CondExpr(Pos p, ExprPtr c, ExprPtr t, ExprPtr o)
      : Expr(Kind::kCondExpr, p), cond(std::move(c)), then(std::move(t)), otherwise(std::move(o)) {}
  ExprPtr cond, then, otherwise;
};

// ---- Statements ----

struct Stmt {
  enum class Kind {
    kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kCallBlock, kFilterBlock, kWith, kBreak,
    kContinue, kScope,
  };
  Stmt(Kind k, Pos p) : kind(k), pos(p) {}
  virtual ~Stmt() = default;
  Kind kind;
  Pos pos;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Where an assignment stores: a name, a tuple of targets, or `ns.attr` on a namespace.
struct Target {
  enum class Kind { kName, kTuple, kNamespaceAttr };
  Kind kind = Kind::kName;
  Pos pos;
  std::string name;  // the variable, or the namespace variable for kNamespaceAttr
  std::string attr;
  std::vector<Target> items;
};

struct Text : Stmt {
  Text(Pos p, std::string t) : Stmt(Kind::kText, p), text(std::move(t)) {}
  std::string text;
};

struct Output : Stmt {
  Output(Pos p, ExprPtr e) : Stmt(Kind::kOutput, p), expr(std::move(e)) {}
  ExprPtr expr;
};

struct If : Stmt {
  explicit If(Pos p) : Stmt(Kind::kIf, p) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, then each elif
  Body else_body;
};

struct For : Stmt {
  explicit For(Pos p) : Stmt(Kind::kFor, p) {}
  Target target;
  ExprPtr iter;
  ExprPtr filter;  // `for x in xs if cond`; may be null
  Body body;
  Body else_body;
};

struct Set : Stmt {
  Set(Pos p, Target t, ExprPtr v) : Stmt(Kind::kSet, p), target(std::move(t)), value(std::move(v)) {}
  Target target;
  ExprPtr value;
};

// {% set x | filters %}body{% endset %}
struct SetBlock : Stmt {
  SetBlock(Pos p, Target t) : Stmt(Kind::kSetBlock, p), target(std::move(t)) {}
  Target target;
  std::vector<std::unique_ptr<Filter>> filters;
  Body body;
};

// Parameters shared by macros and call blocks.
struct Signature {
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // aligned with params; null where there is no default
};

struct Macro : Stmt {
  Macro(Pos p, std::string n) : Stmt(Kind::kMacro, p), name(std::move(n)) {}
  std::string name;
  Signature signature;
  Body body;
  // Whether the body mentions these special names; jinja2 only accepts extra positional or
  // keyword arguments (or a caller) when it does.
  bool uses_varargs = false;
  bool uses_kwargs = false;
  bool uses_caller = false;
};

// {% call(params) macro(args) %}body{% endcall %}: body becomes `caller`.
struct CallBlock : Stmt {
  explicit CallBlock(Pos p) : Stmt(Kind::kCallBlock, p) {}
  std::unique_ptr<Call> call;
  std::shared_ptr<Macro> caller;  // the body as an anonymous macro
};

struct FilterBlock : Stmt {
  explicit FilterBlock(Pos p) : Stmt(Kind::kFilterBlock, p) {}
  std::vector<std::unique_ptr<Filter>> filters;
  Body body;
};

struct With : Stmt {
  explicit With(Pos p) : Stmt(Kind::kWith, p) {}
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
};

struct Break : Stmt {
  explicit Break(Pos p) : Stmt(Kind::kBreak, p) {}
};
struct Continue : Stmt {
  explicit Continue(Pos p) : Stmt(Kind::kContinue, p) {}
};

// A body rendered in its own scope: HF's {% generation %} block, which jinja2 runs as a call
// block's caller.
struct Scope : Stmt {
  explicit Scope(Pos p) : Stmt(Kind::kScope, p) {}
  Body body;
};

struct Template {
  Body body;
};

}  // namespace ember::jinja::ast
