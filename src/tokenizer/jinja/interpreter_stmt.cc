// Statement execution: output, control flow, assignment, macros and blocks.
#include <algorithm>
#include <utility>

#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/pystr.h"

namespace ember::jinja {
namespace {

// Eval/Exec nesting allowed in a render: about a hundred levels of macro recursion, far beyond
// what real templates use, in under 1 MiB of stack.
constexpr int kMaxDepth = 500;

class MacroFunction : public Function {
 public:
  MacroFunction(const ast::Macro* macro, std::weak_ptr<Frame> closure)
      : macro_(macro), closure_(std::move(closure)) {}
  std::string Name() const override { return "Macro " + py::ReprString(macro_->name); }
  Expected<Value> Call(Interpreter& interp, CallArgs args) const override {
    return interp.CallMacro(*macro_, closure_, std::move(args));
  }

 private:
  const ast::Macro* macro_;
  // Weak: the macro is usually stored in the very frame it closes over.
  std::weak_ptr<Frame> closure_;
};

// loop.cycle('odd', 'even')
class LoopCycle : public Function {
 public:
  explicit LoopCycle(int64_t index0) : index0_(index0) {}
  std::string Name() const override { return "method cycle of LoopContext"; }
  Expected<Value> Call(Interpreter&, CallArgs args) const override {
    if (!args.keyword.empty()) return InvalidArgument("loop.cycle() takes no keyword arguments");
    if (args.positional.empty()) return InvalidArgument("no items for cycling given");
    return args.positional[index0_ % static_cast<int64_t>(args.positional.size())];
  }

 private:
  int64_t index0_;
};

Value MakeLoop(const Value::Items& items, size_t i) {
  auto loop = std::make_shared<ObjectData>();
  loop->type_name = "LoopContext";
  const auto n = static_cast<int64_t>(items.size());
  const auto index0 = static_cast<int64_t>(i);
  loop->attrs = {
      {"index0", Value::Int(index0)},
      {"index", Value::Int(index0 + 1)},
      {"revindex0", Value::Int(n - index0 - 1)},
      {"revindex", Value::Int(n - index0)},
      {"first", Value::Bool(i == 0)},
      {"last", Value::Bool(index0 == n - 1)},
      {"length", Value::Int(n)},
      {"depth0", Value::Int(0)},
      {"depth", Value::Int(1)},
      {"cycle", Value::Func(std::make_shared<LoopCycle>(index0))},
  };
  if (i > 0) loop->attrs.emplace_back("previtem", items[i - 1]);
  if (index0 + 1 < n) loop->attrs.emplace_back("nextitem", items[i + 1]);
  return Value::Object(std::move(loop));
}

}  // namespace

Status Interpreter::Render(const ast::Template& tmpl, const FramePtr& globals, std::string* out) {
  flow_ = Flow::kNormal;
  error_located_ = false;
  depth_ = 0;
  steps_ = 0;
  bytes_ = 0;
  const PrintCapScope print_cap(static_cast<size_t>(std::max<int64_t>(0, options_.limits.max_bytes)));
  Status status = Exec(tmpl.body, std::make_shared<Frame>(globals), out);
  for (const auto& ns : namespaces_) ns->attrs.clear();
  namespaces_.clear();
  return status;
}

Expected<Value> Interpreter::ApplyFilter(const std::string& name, const Value& input, CallArgs args) {
  const FilterFn fn = FindFilter(name);
  if (fn == nullptr) {
    return Unimplemented("the '" + name + "' filter is not supported by ember's Jinja subset");
  }
  return fn(*this, input, std::move(args));
}

Expected<bool> Interpreter::ApplyTest(const std::string& name, const Value& input, CallArgs args) {
  const TestFn fn = FindTest(name);
  if (fn == nullptr) return Unimplemented("the '" + name + "' test is not supported by ember's Jinja subset");
  return fn(*this, input, std::move(args));
}

// What an expression's value cost to build: its text (strings are copied whenever they are
// passed on) and, for containers made by the expression itself, their slots and the strings
// copied into them. A variable, attribute or item that names an existing container costs nothing.
static int64_t BuiltBytes(ast::Expr::Kind kind, const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(v.as_string().size());
  using EK = ast::Expr::Kind;
  if (kind == EK::kName || kind == EK::kGetAttr || kind == EK::kGetItem || kind == EK::kLiteral) return 0;
  return ShallowBytes(v);
}

Status Interpreter::CheckRoom(int64_t bytes) const {
  if (bytes >= 0 && bytes <= options_.limits.max_bytes - bytes_) return Status::Ok();
  return InvalidArgument("the template would build more than " + std::to_string(options_.limits.max_bytes) +
                         " bytes of text and values, the limit of one render");
}

Status Interpreter::Spend(int64_t steps, int64_t bytes, const ast::Pos& pos) {
  steps_ += steps;
  bytes_ += bytes + std::exchange(CurrentPrintCap().copied_bytes, 0);
  if (steps_ > options_.limits.max_steps) {
    return Located(InvalidArgument("the template ran more than " + std::to_string(options_.limits.max_steps) +
                                   " steps, the limit of one render (a loop or recursion that runs too long)"),
                   pos);
  }
  if (bytes_ > options_.limits.max_bytes || CurrentPrintCap().exceeded) {
    return Located(InvalidArgument("the template built more than " + std::to_string(options_.limits.max_bytes) +
                                   " bytes of text and values, the limit of one render"),
                   pos);
  }
  return Status::Ok();
}

Status Interpreter::Exec(const ast::Body& body, const FramePtr& frame, std::string* out) {
  for (const auto& stmt : body) {
    EMBER_RETURN_IF_ERROR(ExecOne(*stmt, frame, out));
    if (flow_ != Flow::kNormal) break;
  }
  return Status::Ok();
}

Status Interpreter::ExecOne(const ast::Stmt& stmt, const FramePtr& frame, std::string* out) {
  if (depth_ >= kMaxDepth) {
    return Located(InvalidArgument("maximum recursion depth exceeded while rendering the template"), stmt.pos);
  }
  EMBER_RETURN_IF_ERROR(Spend(1, 0, stmt.pos));
  ++depth_;
  const size_t before = out->size();
  Status status = ExecNode(stmt, frame, out);
  --depth_;
  EMBER_RETURN_IF_ERROR(status);
  // The output's growth counts as built text (what a statement prints went into `out`).
  return Spend(0, static_cast<int64_t>(out->size() >= before ? out->size() - before : 0), stmt.pos);
}

Expected<Value> Interpreter::Eval(const ast::Expr& expr, const FramePtr& frame) {
  if (depth_ >= kMaxDepth) {
    return Located(InvalidArgument("maximum recursion depth exceeded while rendering the template"), expr.pos);
  }
  EMBER_RETURN_IF_ERROR(Spend(1, 0, expr.pos));
  ++depth_;
  auto result = EvalNode(expr, frame);
  --depth_;
  if (result.ok()) EMBER_RETURN_IF_ERROR(Spend(0, BuiltBytes(expr.kind, *result), expr.pos));
  if (result.ok() && result->depth() > kMaxValueDepth) {
    return Located(InvalidArgument("a value nests more than " + std::to_string(kMaxValueDepth) +
                                   " containers deep"),
                   expr.pos);
  }
  return result;
}

Status Interpreter::ExecNode(const ast::Stmt& stmt, const FramePtr& frame, std::string* out) {
  using SK = ast::Stmt::Kind;
  switch (stmt.kind) {
    case SK::kText:
      out->append(static_cast<const ast::Text&>(stmt).text);
      return Status::Ok();
    case SK::kOutput: {
      EMBER_ASSIGN_OR_RETURN(Value v, Eval(*static_cast<const ast::Output&>(stmt).expr, frame));
      out->append(ToStr(v));
      return Status::Ok();
    }
    case SK::kIf: {
      const auto& node = static_cast<const ast::If&>(stmt);
      for (const auto& [cond, body] : node.branches) {
        EMBER_ASSIGN_OR_RETURN(Value v, Eval(*cond, frame));
        if (Truthy(v)) return Exec(body, frame, out);
      }
      return Exec(node.else_body, frame, out);
    }
    case SK::kFor:
      return ExecFor(static_cast<const ast::For&>(stmt), frame, out);
    case SK::kSet: {
      const auto& node = static_cast<const ast::Set&>(stmt);
      EMBER_ASSIGN_OR_RETURN(Value v, Eval(*node.value, frame));
      return Assign(node.target, v, frame);
    }
    case SK::kSetBlock: {
      const auto& node = static_cast<const ast::SetBlock&>(stmt);
      std::string captured;
      EMBER_RETURN_IF_ERROR(Exec(node.body, std::make_shared<Frame>(frame), &captured));
      EMBER_ASSIGN_OR_RETURN(Value v, ApplyFilterChain(node.filters, Value::Str(std::move(captured)), frame));
      return Assign(node.target, v, frame);
    }
    case SK::kMacro: {
      const auto& node = static_cast<const ast::Macro&>(stmt);
      frame->Set(node.name, Value::Func(std::make_shared<MacroFunction>(&node, frame)));
      return Status::Ok();
    }
    case SK::kCallBlock: {
      const auto& node = static_cast<const ast::CallBlock&>(stmt);
      const Value caller = Value::Func(std::make_shared<MacroFunction>(node.caller.get(), frame));
      EMBER_ASSIGN_OR_RETURN(Value v, EvalCall(*node.call, frame, &caller));
      out->append(ToStr(v));
      return Status::Ok();
    }
    case SK::kFilterBlock: {
      const auto& node = static_cast<const ast::FilterBlock&>(stmt);
      std::string captured;
      EMBER_RETURN_IF_ERROR(Exec(node.body, std::make_shared<Frame>(frame), &captured));
      EMBER_ASSIGN_OR_RETURN(Value v, ApplyFilterChain(node.filters, Value::Str(std::move(captured)), frame));
      out->append(ToStr(v));
      return Status::Ok();
    }
    case SK::kWith: {
      const auto& node = static_cast<const ast::With&>(stmt);
      // Values are computed in the outer scope before any target is bound, as jinja2 does.
      std::vector<Value> values;
      for (const auto& assignment : node.assignments) {
        EMBER_ASSIGN_OR_RETURN(Value v, Eval(*assignment.second, frame));
        values.push_back(std::move(v));
      }
      auto inner = std::make_shared<Frame>(frame);
      for (size_t i = 0; i < values.size(); ++i) {
        EMBER_RETURN_IF_ERROR(Assign(node.assignments[i].first, values[i], inner));
      }
      return Exec(node.body, inner, out);
    }
    case SK::kBreak:
      flow_ = Flow::kBreak;
      return Status::Ok();
    case SK::kContinue:
      flow_ = Flow::kContinue;
      return Status::Ok();
    case SK::kScope:
      return Exec(static_cast<const ast::Scope&>(stmt).body, std::make_shared<Frame>(frame), out);
  }
  return Internal("unknown statement kind");
}

Status Interpreter::ExecFor(const ast::For& node, const FramePtr& frame, std::string* out) {
  EMBER_ASSIGN_OR_RETURN(Value iterable, Eval(*node.iter, frame));
  auto all = Iterate(iterable);
  if (!all.ok()) return Located(all.status(), node.iter->pos);
  Value::Items items;
  if (node.filter) {
    // The filter sees the loop target but no `loop` variable, and decides what `loop` counts.
    for (Value& item : *all) {
      EMBER_RETURN_IF_ERROR(Spend(1, 0, node.pos));
      auto probe = std::make_shared<Frame>(frame);
      EMBER_RETURN_IF_ERROR(Assign(node.target, item, probe));
      EMBER_ASSIGN_OR_RETURN(Value keep, Eval(*node.filter, probe));
      if (Truthy(keep)) items.push_back(std::move(item));
    }
  } else {
    items = std::move(*all);
  }
  if (items.empty()) return Exec(node.else_body, std::make_shared<Frame>(frame), out);
  for (size_t i = 0; i < items.size(); ++i) {
    // The item is copied into the target and into loop.previtem / loop.nextitem.
    const int64_t copied = items[i].is_string() ? static_cast<int64_t>(items[i].as_string().size()) : 0;
    EMBER_RETURN_IF_ERROR(Spend(1, 3 * copied, node.pos));
    auto iteration = std::make_shared<Frame>(frame);
    iteration->Set("loop", MakeLoop(items, i));
    EMBER_RETURN_IF_ERROR(Assign(node.target, items[i], iteration));
    EMBER_RETURN_IF_ERROR(Exec(node.body, iteration, out));
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    flow_ = Flow::kNormal;
  }
  return Status::Ok();
}

Status Interpreter::Assign(const ast::Target& target, const Value& value, const FramePtr& frame) {
  switch (target.kind) {
    case ast::Target::Kind::kName:
      frame->Set(target.name, value);
      return Status::Ok();
    case ast::Target::Kind::kTuple: {
      auto items = Iterate(value);
      if (!items.ok()) {
        return Located(InvalidArgument("cannot unpack non-iterable " + TypeName(value) + " object"), target.pos);
      }
      const size_t want = target.items.size();
      if (items->size() != want) {
        return Located(InvalidArgument(items->size() > want
                                           ? "too many values to unpack (expected " + std::to_string(want) + ")"
                                           : "not enough values to unpack (expected " + std::to_string(want) +
                                                 ", got " + std::to_string(items->size()) + ")"),
                       target.pos);
      }
      for (size_t i = 0; i < want; ++i) EMBER_RETURN_IF_ERROR(Assign(target.items[i], (*items)[i], frame));
      return Status::Ok();
    }
    case ast::Target::Kind::kNamespaceAttr: {
      const Value* ns = frame->Lookup(target.name);
      if (ns == nullptr || !ns->is_object() || !ns->object().assignable) {
        return Located(InvalidArgument("cannot assign attribute on non-namespace object"), target.pos);
      }
      if (!target.attr.empty() && target.attr[0] == '_') {
        // HF's TemplateNamespace refuses underscore names to keep templates out of internals.
        return Located(InvalidArgument("Chat templates cannot store underscore-prefixed attributes on a "
                                       "namespace, but got " + py::ReprString(target.attr) +
                                       ". Please rename the attribute."),
                       target.pos);
      }
      ns->object().Set(target.attr, value);
      return Status::Ok();
    }
  }
  return Internal("unknown assignment target");
}

Expected<Value> Interpreter::ApplyFilterChain(const std::vector<std::unique_ptr<ast::Filter>>& filters,
                                              Value input, const FramePtr& frame) {
  for (const auto& filter : filters) {
    EMBER_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(filter->args, frame));
    auto result = ApplyFilter(filter->name, input, std::move(args));
    if (!result.ok()) return Located(result.status(), filter->pos);
    input = std::move(*result);
  }
  return input;
}

Expected<Value> Interpreter::CallMacro(const ast::Macro& macro, const std::weak_ptr<Frame>& closure,
                                       CallArgs args) {
  FramePtr parent = closure.lock();
  if (!parent) return InvalidArgument("macro " + py::ReprString(macro.name) + " called after its scope ended");
  auto frame = std::make_shared<Frame>(parent);
  const auto& params = macro.signature.params;
  const std::string quoted = py::ReprString(macro.name);
  // jinja2 passes `caller` as a keyword; take it out before matching the declared parameters.
  for (auto it = args.keyword.begin(); it != args.keyword.end(); ++it) {
    if (it->first == "caller" && std::find(params.begin(), params.end(), "caller") == params.end()) {
      frame->Set("caller", it->second);
      args.keyword.erase(it);
      break;
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    std::optional<Value> value;
    if (i < args.positional.size()) value = args.positional[i];
    for (auto it = args.keyword.begin(); it != args.keyword.end(); ++it) {
      if (it->first != params[i]) continue;
      if (value) return InvalidArgument("macro " + quoted + " got multiple values for argument " + py::ReprString(params[i]));
      value = std::move(it->second);
      args.keyword.erase(it);
      break;
    }
    if (!value && macro.signature.defaults[i]) {
      // Defaults are evaluated at call time in the macro's scope, so they may use earlier parameters.
      EMBER_ASSIGN_OR_RETURN(value, Eval(*macro.signature.defaults[i], frame));
    }
    frame->Set(params[i], value ? std::move(*value) : Value::Undefined("parameter " + py::ReprString(params[i]) + " was not provided"));
  }
  if (args.positional.size() > params.size()) {
    if (!macro.uses_varargs) {
      return InvalidArgument("macro " + quoted + " takes not more than " + std::to_string(params.size()) + " argument(s)");
    }
    frame->Set("varargs", Value::Tuple(Value::Items(args.positional.begin() + params.size(), args.positional.end())));
  } else if (macro.uses_varargs) {
    frame->Set("varargs", Value::Tuple({}));
  }
  if (!args.keyword.empty() && !macro.uses_kwargs) {
    return InvalidArgument("macro " + quoted + " takes no keyword argument " + py::ReprString(args.keyword[0].first));
  }
  if (macro.uses_kwargs) {
    Value::Entries kwargs;
    for (auto& [k, v] : args.keyword) kwargs.emplace_back(Value::Str(k), std::move(v));
    frame->Set("kwargs", Value::Dict(std::move(kwargs)));
  }
  std::string rendered;
  EMBER_RETURN_IF_ERROR(Exec(macro.body, frame, &rendered));
  return Value::Str(std::move(rendered));
}

}  // namespace ember::jinja
