// Whether a chat template loops over a message's content parts, read from its syntax tree.
//
// OpenAI messages may carry their content as a list of parts ([{"type": "text", "text": ...}]).
// Some templates iterate over that list (Gemma 3's: each text part trimmed on its own, an image
// part written as <start_of_image>); most concatenate message['content'] as a string and fail on a
// list. transformers passes whatever it is given; vLLM decides per template, by looking for a loop
// over a message's content, and gives such templates the list and the others the parts' texts
// joined by "\n". This is that decision, made from ember's own tree:
//
//   1. the variables that hold the conversation: `messages`, and whatever a `set` assigns from one
//      of them (`set loop_messages = messages[1:]`, also through filters and tests), to a fixpoint;
//   2. the variables that hold one message: the targets of `for` loops over those;
//   3. a content loop: a `for` over `m['content']` or `m.content` of such an `m` (again also
//      through a slice, filter or test), or over a variable named `content`.
//
// Like vLLM this ignores scopes (a name assigned anywhere counts everywhere): a template that
// reuses names oddly may be misjudged, and then renders as it would under vLLM.
#include <set>
#include <string>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/template.h"

namespace ember::jinja {
namespace {

using ast::Body;
using ast::Expr;
using ast::Stmt;

// Calls visit(stmt) for every statement of `body`, nested ones included.
template <typename F>
void ForEachStmt(const Body& body, F& visit) {
  for (const ast::StmtPtr& s : body) {
    visit(*s);
    switch (s->kind) {
      case Stmt::Kind::kIf: {
        const auto& n = static_cast<const ast::If&>(*s);
        for (const auto& [cond, branch] : n.branches) ForEachStmt(branch, visit);
        ForEachStmt(n.else_body, visit);
        break;
      }
      case Stmt::Kind::kFor: {
        const auto& n = static_cast<const ast::For&>(*s);
        ForEachStmt(n.body, visit);
        ForEachStmt(n.else_body, visit);
        break;
      }
      case Stmt::Kind::kSetBlock: ForEachStmt(static_cast<const ast::SetBlock&>(*s).body, visit); break;
      case Stmt::Kind::kMacro: ForEachStmt(static_cast<const ast::Macro&>(*s).body, visit); break;
      case Stmt::Kind::kCallBlock: {
        const auto& n = static_cast<const ast::CallBlock&>(*s);
        if (n.caller) ForEachStmt(n.caller->body, visit);
        break;
      }
      case Stmt::Kind::kFilterBlock: ForEachStmt(static_cast<const ast::FilterBlock&>(*s).body, visit); break;
      case Stmt::Kind::kWith: ForEachStmt(static_cast<const ast::With&>(*s).body, visit); break;
      case Stmt::Kind::kScope: ForEachStmt(static_cast<const ast::Scope&>(*s).body, visit); break;
      default: break;
    }
  }
}

// `e` with slices, filters and tests taken off: `messages[1:] | reverse` reads `messages`.
const Expr* Unwrap(const Expr* e) {
  while (e != nullptr) {
    if (e->kind == Expr::Kind::kSlice) {
      e = static_cast<const ast::Slice*>(e)->object.get();
    } else if (e->kind == Expr::Kind::kFilter) {
      e = static_cast<const ast::Filter*>(e)->input.get();
    } else if (e->kind == Expr::Kind::kTest) {
      e = static_cast<const ast::Test*>(e)->input.get();
    } else {
      return e;
    }
  }
  return nullptr;
}

bool IsNameIn(const Expr* e, const std::set<std::string>& names) {
  return e != nullptr && e->kind == Expr::Kind::kName && names.count(static_cast<const ast::Name*>(e)->name) > 0;
}

// `m['content']` or `m.content` for an `m` in `names` (under slices, filters and tests).
bool IsContentOf(const Expr* e, const std::set<std::string>& names) {
  e = Unwrap(e);
  if (e == nullptr) return false;
  if (e->kind == Expr::Kind::kGetAttr) {
    const auto* g = static_cast<const ast::GetAttr*>(e);
    return g->attr == "content" && IsNameIn(g->object.get(), names);
  }
  if (e->kind == Expr::Kind::kGetItem) {
    const auto* g = static_cast<const ast::GetItem*>(e);
    if (g->index == nullptr || g->index->kind != Expr::Kind::kLiteral) return false;
    const Value& key = static_cast<const ast::Literal*>(g->index.get())->value;
    return key.is_string() && key.as_string() == "content" && IsNameIn(g->object.get(), names);
  }
  return false;
}

}  // namespace

bool Template::LoopsOverMessageContent() const {
  const Body& body = root_->body;
  // 1. Names holding the conversation, to a fixpoint.
  std::set<std::string> conversations = {"messages"};
  for (bool grew = true; grew;) {
    grew = false;
    auto visit = [&](const Stmt& s) {
      if (s.kind != Stmt::Kind::kSet) return;
      const auto& set = static_cast<const ast::Set&>(s);
      if (set.target.kind == ast::Target::Kind::kName && !conversations.count(set.target.name) &&
          IsNameIn(Unwrap(set.value.get()), conversations)) {
        conversations.insert(set.target.name);
        grew = true;
      }
    };
    ForEachStmt(body, visit);
  }
  // 2. Names holding one message.
  std::set<std::string> messages;
  auto find_messages = [&](const Stmt& s) {
    if (s.kind != Stmt::Kind::kFor) return;
    const auto& loop = static_cast<const ast::For&>(s);
    if (loop.target.kind == ast::Target::Kind::kName && IsNameIn(Unwrap(loop.iter.get()), conversations)) {
      messages.insert(loop.target.name);
    }
  };
  ForEachStmt(body, find_messages);
  // 3. A loop over a message's content.
  bool found = false;
  auto find_content_loop = [&](const Stmt& s) {
    if (s.kind != Stmt::Kind::kFor) return;
    const Expr* iter = static_cast<const ast::For&>(s).iter.get();
    found = found || IsContentOf(iter, messages) || IsNameIn(Unwrap(iter), {"content"});
  };
  ForEachStmt(body, find_content_loop);
  return found;
}

}  // namespace ember::jinja
