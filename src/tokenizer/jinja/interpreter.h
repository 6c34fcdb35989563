// Tree-walking evaluator with jinja2's runtime semantics as configured by Hugging Face
// (ImmutableSandboxedEnvironment, default Undefined, loopcontrols).
//
// Scoping follows jinja2: each for-loop iteration, macro call, `with` block and call/generation
// body gets a child frame, so `{% set %}` inside them does not leak out (namespaces are the
// sanctioned way around that); `if` bodies share their parent's frame. Macros see their defining
// frame by reference, so they read variables as they are at call time, as jinja2 does.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace ember::jinja {

struct Frame;
using FramePtr = std::shared_ptr<Frame>;

struct Frame {
  explicit Frame(FramePtr p) : parent(std::move(p)) {}
  FramePtr parent;
  std::vector<std::pair<std::string, Value>> vars;

  // Walks up the chain; nullptr if no frame defines `name`.
  const Value* Lookup(std::string_view name) const;
  void Set(const std::string& name, Value value);
};

// How much work one render may do. jinja2 has no such limits (its loops are bounded only by
// range()'s 100,000, and nested loops or `'' * 10**18` run for ever), but a template and its
// inputs are untrusted here: a render that would go past a limit fails with an error naming it.
// The defaults are far above what real chat templates need (a few hundred steps and a few times
// the conversation's bytes per message).
struct RenderLimits {
  // Statements, expressions and loop iterations executed.
  int64_t max_steps = 10'000'000;
  // Bytes of text and values built, all together: the output, every string an expression makes
  // (copies included) and the containers it makes. Also the most any one value may print as.
  int64_t max_bytes = int64_t{1} << 30;
};

struct RenderOptions {
  // The local time strftime_now() formats. Unset means the system clock in local time, which is
  // what HF's datetime.now() uses; tests pin it.
  std::optional<std::tm> now;
  RenderLimits limits;
};

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& options) : options_(options) {}

  // Renders `tmpl` with `globals` as the outermost frame.
  Status Render(const ast::Template& tmpl, const FramePtr& globals, std::string* out);

  const RenderOptions& options() const { return options_; }

  // Operations filters, tests, methods and globals build on; each follows the sandboxed jinja2
  // behaviour and returns a Status where Python would raise.
  Expected<Value> GetAttr(const Value& object, const std::string& name);  // object.name
  Expected<Value> GetItem(const Value& object, const Value& key);         // object[key]
  Expected<Value> CallValue(const Value& callee, CallArgs args);
  Expected<Value> ApplyFilter(const std::string& name, const Value& input, CallArgs args);
  Expected<bool> ApplyTest(const std::string& name, const Value& input, CallArgs args);
  // `make_attrgetter`: item.a.b for attribute "a.b" (digit parts index sequences).
  Expected<Value> GetAttributePath(const Value& item, const Value& attribute);
  Expected<Value> CallMacro(const ast::Macro& macro, const std::weak_ptr<Frame>& closure,
                            CallArgs args);
  Expected<Value> Eval(const ast::Expr& expr, const FramePtr& frame);
  // Namespaces are the only mutable values, so every reference cycle runs through one. Render
  // holds each namespace it created and empties them all when it finishes, which frees cycles
  // (and long namespace chains) without recursion.
  void TrackNamespace(std::shared_ptr<ObjectData> ns) { namespaces_.push_back(std::move(ns)); }
  // Whether `bytes` more may still be built within RenderLimits::max_bytes; built-ins whose
  // result can be far larger than their inputs (str * n, center, join, replace, indent, ...) ask
  // before building it. The error names the limit.
  Status CheckRoom(int64_t bytes) const;

 private:
  // ---- statements (interpreter_stmt.cc) ----
  Status Exec(const ast::Body& body, const FramePtr& frame, std::string* out);
  Status ExecOne(const ast::Stmt& stmt, const FramePtr& frame, std::string* out);
  Status ExecNode(const ast::Stmt& stmt, const FramePtr& frame, std::string* out);
  Status ExecFor(const ast::For& node, const FramePtr& frame, std::string* out);
  Status Assign(const ast::Target& target, const Value& value, const FramePtr& frame);
  Expected<Value> ApplyFilterChain(const std::vector<std::unique_ptr<ast::Filter>>& filters,
                                   Value input, const FramePtr& frame);

  // ---- expressions (interpreter_expr.cc) ----
  Expected<Value> EvalNode(const ast::Expr& expr, const FramePtr& frame);
  Expected<Value> EvalCall(const ast::Call& call, const FramePtr& frame, const Value* caller);
  Expected<CallArgs> EvalArgs(const ast::Args& args, const FramePtr& frame);
  Expected<Value> EvalBinary(const ast::Binary& node, const FramePtr& frame);
  Expected<Value> EvalCompare(const ast::Compare& node, const FramePtr& frame);
  Expected<Value> EvalSlice(const ast::Slice& node, const FramePtr& frame);

  // Prefixes the first error of a render with where it happened; later (outer) callers see the
  // error already located and pass it through unchanged.
  Status Located(Status status, const ast::Pos& pos);
  // Counts work against RenderLimits; the error is located at `pos`.
  Status Spend(int64_t steps, int64_t bytes, const ast::Pos& pos);

  enum class Flow { kNormal, kBreak, kContinue };
  const RenderOptions& options_;
  Flow flow_ = Flow::kNormal;
  // Nesting of Eval/Exec calls. Recursive macros (and absurdly nested templates) would otherwise
  // exhaust the C++ stack; jinja2 stops them with Python's recursion limit.
  int depth_ = 0;
  int64_t steps_ = 0;
  int64_t bytes_ = 0;
  std::vector<std::shared_ptr<ObjectData>> namespaces_;
  bool error_located_ = false;
};

// ---- Building blocks shared by the evaluator, filters, tests, methods and globals ----

// Binds Python-style arguments to a parameter list; unknown keywords, duplicate values and surplus
// positionals are TypeErrors. Unfilled parameters stay nullopt.
Expected<std::vector<std::optional<Value>>> BindArgs(std::string_view function, CallArgs args,
                                                     const std::vector<std::string_view>& params);

// Python's binary operators (+ - * / // % ** and ~) on values.
Expected<Value> BinaryOp(ast::Binary::Op op, const Value& a, const Value& b);
// Python's `item in container`.
Expected<bool> Contains(const Value& container, const Value& item);
// Whether str.replace(old, replacement, count) on `s` fits the render's limits (an empty `old`
// inserts the replacement between every two characters).
Status CheckReplaceRoom(const Interpreter& interp, const std::string& s, const std::string& old,
                        const std::string& replacement, int64_t count);
// Python's `str % args` (printf-style formatting), for the `%` operator and the format filter.
Expected<std::string> PercentFormat(const std::string& format, const Value& args);

// Methods on str, dict, list and tuple (methods.cc). HasMethod says whether `name` is one jinja2's
// sandbox would let a template reach.
bool HasMethod(const Value& receiver, std::string_view name);
// A mutating method the ImmutableSandboxedEnvironment hides (list.append, dict.update, ...); such
// an attribute reads as an Undefined whose use raises the sandbox's SecurityError message.
bool IsUnsafeMethod(const Value& receiver, std::string_view name);
Expected<Value> CallMethod(Interpreter& interp, const Value& receiver, const std::string& name,
                           CallArgs args);
// A bound method as a first-class value, for `x.split` used without a call.
Value BoundMethod(const Value& receiver, const std::string& name);

// Filter and test tables (filters.cc, tests.cc). nullptr for names that jinja2 knows but this
// engine does not implement.
using FilterFn = Expected<Value> (*)(Interpreter& interp, const Value& input, CallArgs args);
using TestFn = Expected<bool> (*)(Interpreter& interp, const Value& input, CallArgs args);
FilterFn FindFilter(std::string_view name);
TestFn FindTest(std::string_view name);

// Globals HF's environment provides: range, namespace, dict, raise_exception, strftime_now (plus
// jinja2's lipsum, cycler and joiner, which fail when called).
void AddGlobals(Frame& frame);

}  // namespace ember::jinja
