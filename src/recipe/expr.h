// The condition language of the recipe rules (src/recipe/rules.json): a small, side-effect-free
// expression over named facts, so that every rule is data and the planner has no per-rule code.
//
//   vendor == 'amd' and parallelism in ['dp_attention_ep', 'pd_disagg']
//   'image' in modalities or concurrency >= 32
//   min(max_num_seqs, 8)          devices_total / 2          not speculative
//
// Values are booleans, numbers (double), strings ('single quoted', so rules embed cleanly in
// JSON) and lists of strings. Operators, loosest first: or, and, not, comparisons (== != < <= >
// >= in, "not in"), + -, * /. Functions: min(a, b), max(a, b). An identifier names a fact; an
// unknown identifier is an error, never false, so a typo in a rule cannot silently disable it.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace ember::recipe {

struct Value {
  enum class Kind { kBool, kNumber, kString, kList };
  Kind kind = Kind::kBool;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<std::string> list;

  static Value Bool(bool b);
  static Value Number(double n);
  static Value String(std::string s);
  static Value List(std::vector<std::string> l);
  bool operator==(const Value& other) const;
  // 'amd', 8, true, ['text', 'image']: the form rules use, for messages and JSON.
  std::string ToString() const;
};

using Facts = std::map<std::string, Value>;

class Expr {
 public:
  // Parses `text`; the error names the position and what was expected.
  static Expected<Expr> Parse(const std::string& text);

  Expected<Value> Eval(const Facts& facts) const;
  // Eval that must produce a boolean (a rule's `when`).
  Expected<bool> EvalBool(const Facts& facts) const;
  // Every identifier the expression reads (to check rules against the known fact names).
  std::set<std::string> Identifiers() const;
  const std::string& text() const { return text_; }

  struct Node;

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

}  // namespace ember::recipe
