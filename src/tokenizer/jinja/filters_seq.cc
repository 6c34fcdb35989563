// Sequence filters: length, first/last, join, sorting, selection and mapping.
//
// jinja2 implements select/reject/map/unique/items as generators; they come back as iterator
// values (no len(), always truthy) so that templates behave as under jinja2, e.g.
// `xs|select(...)|length` fails there and here alike.
#include <algorithm>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/pystr.h"

namespace ember::jinja {
namespace {

using Bound = std::vector<std::optional<Value>>;

Value Arg(const Bound& b, size_t i, Value fallback) { return b[i] ? *b[i] : std::move(fallback); }

// jinja2's ignore_case postprocessing for sort keys.
Value IgnoreCase(const Value& v, bool case_sensitive) {
  if (case_sensitive || !v.is_string()) return v;
  return Value::Str(py::Lower(v.as_string()));
}

// Sort key of `item`: the attribute (or comma-separated attributes) or the item itself.
Expected<Value> SortKey(Interpreter& interp, const Value& item, const Value& attribute, bool case_sensitive) {
  if (attribute.is_none() || attribute.is_undefined()) return IgnoreCase(item, case_sensitive);
  if (!attribute.is_string()) {
    EMBER_ASSIGN_OR_RETURN(Value v, interp.GetAttributePath(item, attribute));
    return IgnoreCase(v, case_sensitive);
  }
  Value::Items parts;
  for (const std::string& part : py::Split(attribute.as_string(), std::string(","), -1)) {
    EMBER_ASSIGN_OR_RETURN(Value v, interp.GetAttributePath(item, Value::Str(part)));
    parts.push_back(IgnoreCase(v, case_sensitive));
  }
  return parts.size() == 1 ? parts[0] : Value::List(std::move(parts));
}

// Python's sorted(): stable, and reverse=True keeps equal elements in their original order.
Status StableSort(std::vector<std::pair<Value, Value>>& keyed, bool reverse) {
  Status failure;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    if (!failure.ok() || Equals(a.first, b.first)) return false;
    auto c = reverse ? Compare(b.first, a.first) : Compare(a.first, b.first);
    if (!c.ok()) {
      failure = c.status();
      return false;
    }
    return *c < 0;
  });
  return failure;
}

Expected<Value> Length(Interpreter&, const Value& in, CallArgs args) {
  EMBER_RETURN_IF_ERROR(BindArgs("length", std::move(args), {}).status());
  EMBER_ASSIGN_OR_RETURN(int64_t n, jinja::Length(in));
  return Value::Int(n);
}

Expected<Value> First(Interpreter&, const Value& in, CallArgs args) {
  EMBER_RETURN_IF_ERROR(BindArgs("first", std::move(args), {}).status());
  EMBER_ASSIGN_OR_RETURN(Value::Items items, Iterate(in));
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return items[0];
}

Expected<Value> Last(Interpreter&, const Value& in, CallArgs args) {
  EMBER_RETURN_IF_ERROR(BindArgs("last", std::move(args), {}).status());
  if (in.kind() == Value::Kind::kIterator || !(in.is_string() || in.is_sequence() || in.is_dict() || in.is_undefined())) {
    return InvalidArgument(QuotedTypeName(in) + " object is not reversible");
  }
  EMBER_ASSIGN_OR_RETURN(Value::Items items, Iterate(in));
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

Expected<Value> List(Interpreter&, const Value& in, CallArgs args) {
  EMBER_RETURN_IF_ERROR(BindArgs("list", std::move(args), {}).status());
  EMBER_ASSIGN_OR_RETURN(Value::Items items, Iterate(in));
  return Value::List(std::move(items));
}

Expected<Value> Join(Interpreter& interp, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("join", std::move(args), {"d", "attribute"}));
  EMBER_ASSIGN_OR_RETURN(Value::Items items, Iterate(in));
  const std::string sep = ToStr(Arg(b, 0, Value::Str("")));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (b[1] && !b[1]->is_none()) {
      EMBER_ASSIGN_OR_RETURN(item, interp.GetAttributePath(item, *b[1]));
    }
    if (i > 0) out += sep;
    out += ToStr(item);
    EMBER_RETURN_IF_ERROR(interp.CheckRoom(static_cast<int64_t>(out.size())));
  }
  return Value::Str(std::move(out));
}

Expected<Value> Items(Interpreter&, const Value& in, CallArgs args) {
  EMBER_RETURN_IF_ERROR(BindArgs("items", std::move(args), {}).status());
  if (in.is_undefined()) return Value::Iterator({});
  if (!in.is_dict()) return InvalidArgument("Can only get item pairs from a mapping.");
  Value::Items pairs;
  for (const auto& [k, v] : in.entries()) pairs.push_back(Value::Tuple({k, v}));
  return Value::Iterator(std::move(pairs));
}

Expected<Value> DictSort(Interpreter&, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("dictsort", std::move(args), {"case_sensitive", "by", "reverse"}));
  if (in.is_undefined()) return InvalidArgument(in.undefined_hint());
  if (!in.is_dict()) return InvalidArgument(QuotedTypeName(in) + " object has no attribute 'items'");
  const Value by = Arg(b, 1, Value::Str("key"));
  if (!by.is_string() || (by.as_string() != "key" && by.as_string() != "value")) {
    return InvalidArgument("You can only sort by either \"key\" or \"value\"");
  }
  const bool case_sensitive = b[0] && Truthy(*b[0]);
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [k, v] : in.entries()) {
    keyed.emplace_back(IgnoreCase(by.as_string() == "key" ? k : v, case_sensitive), Value::Tuple({k, v}));
  }
  EMBER_RETURN_IF_ERROR(StableSort(keyed, b[2] && Truthy(*b[2])));
  Value::Items out;
  for (auto& [key, pair] : keyed) out.push_back(std::move(pair));
  return Value::List(std::move(out));
}

Expected<Value> Sort(Interpreter& interp, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("sort", std::move(args), {"reverse", "case_sensitive", "attribute"}));
  EMBER_ASSIGN_OR_RETURN(Value::Items items, Iterate(in));
  const bool case_sensitive = b[1] && Truthy(*b[1]);
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) {
    EMBER_ASSIGN_OR_RETURN(Value key, SortKey(interp, item, Arg(b, 2, Value::None()), case_sensitive));
    keyed.emplace_back(std::move(key), std::move(item));
  }
  EMBER_RETURN_IF_ERROR(StableSort(keyed, b[0] && Truthy(*b[0])));
  Value::Items out;
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return Value::List(std::move(out));
}

Expected<Value> Unique(Interpreter& interp, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("unique", std::move(args), {"case_sensitive", "attribute"}));
  EMBER_ASSIGN_OR_RETURN(Value::Items items, Iterate(in));
  const bool case_sensitive = b[0] && Truthy(*b[0]);
  Value::Items seen, out;
  for (Value& item : items) {
    EMBER_ASSIGN_OR_RETURN(Value key, SortKey(interp, item, Arg(b, 1, Value::None()), case_sensitive));
    if (!Hashable(key)) return InvalidArgument("unhashable type: '" + TypeName(key) + "'");
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return Equals(s, key); })) continue;
    seen.push_back(std::move(key));
    out.push_back(std::move(item));
  }
  return Value::Iterator(std::move(out));
}

Expected<Value> Reverse(Interpreter&, const Value& in, CallArgs args) {
  EMBER_RETURN_IF_ERROR(BindArgs("reverse", std::move(args), {}).status());
  if (in.is_string()) {
    std::u32string cps = py::Decode(in.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value::Str(py::Encode(cps));
  }
  auto items = Iterate(in);
  if (!items.ok()) return InvalidArgument("argument must be iterable");
  std::reverse(items->begin(), items->end());
  // reversed() gives an iterator; a generator has no reversed() and becomes a reversed list.
  if (in.kind() == Value::Kind::kIterator) return Value::List(std::move(*items));
  return Value::Iterator(std::move(*items));
}

// select/reject/selectattr/rejectattr share jinja2's prepare_select_or_reject.
Expected<Value> SelectOrReject(Interpreter& interp, const Value& in, CallArgs args, bool lookup_attr, bool keep) {
  const std::string name = std::string(keep ? "select" : "reject") + (lookup_attr ? "attr" : "");
  EMBER_ASSIGN_OR_RETURN(Value::Items items, Iterate(in));
  size_t off = 0;
  Value attribute;
  if (lookup_attr) {
    if (args.positional.empty()) return InvalidArgument("Missing parameter for attribute name");
    attribute = args.positional[0];
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (args.positional.size() > off) {
    if (!args.positional[off].is_string()) return InvalidArgument(name + ": the test name must be a string");
    test = args.positional[off].as_string();
    if (!IsJinjaTestName(*test)) return InvalidArgument("No test named " + py::ReprString(*test) + ".");
    test_args.positional.assign(args.positional.begin() + off + 1, args.positional.end());
    test_args.keyword = args.keyword;
  }
  Value::Items out;
  for (Value& item : items) {
    Value subject = item;
    if (lookup_attr) {
      EMBER_ASSIGN_OR_RETURN(subject, interp.GetAttributePath(item, attribute));
    }
    bool passed;
    if (test) {
      EMBER_ASSIGN_OR_RETURN(passed, interp.ApplyTest(*test, subject, test_args));
    } else {
      passed = Truthy(subject);
    }
    if (passed == keep) out.push_back(std::move(item));
  }
  return Value::Iterator(std::move(out));
}

Expected<Value> Select(Interpreter& i, const Value& in, CallArgs a) { return SelectOrReject(i, in, std::move(a), false, true); }
Expected<Value> Reject(Interpreter& i, const Value& in, CallArgs a) { return SelectOrReject(i, in, std::move(a), false, false); }
Expected<Value> SelectAttr(Interpreter& i, const Value& in, CallArgs a) { return SelectOrReject(i, in, std::move(a), true, true); }
Expected<Value> RejectAttr(Interpreter& i, const Value& in, CallArgs a) { return SelectOrReject(i, in, std::move(a), true, false); }

Expected<Value> Map(Interpreter& interp, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Value::Items items, Iterate(in));
  Value::Items out;
  if (args.positional.empty()) {
    std::optional<Value> attribute, fallback;
    for (auto& [k, v] : args.keyword) {
      if (k == "attribute") {
        attribute = v;
      } else if (k == "default") {
        fallback = v;
      } else {
        return InvalidArgument("Unexpected keyword argument " + py::ReprString(k));
      }
    }
    if (!attribute) return InvalidArgument("map requires a filter argument");
    for (const Value& item : items) {
      EMBER_ASSIGN_OR_RETURN(Value v, interp.GetAttributePath(item, *attribute));
      if (fallback && !fallback->is_none() && v.is_undefined()) v = *fallback;
      out.push_back(std::move(v));
    }
    return Value::Iterator(std::move(out));
  }
  if (!args.positional[0].is_string()) return InvalidArgument("map: the filter name must be a string");
  const std::string filter = args.positional[0].as_string();
  if (!IsJinjaFilterName(filter)) return InvalidArgument("No filter named " + py::ReprString(filter) + ".");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    EMBER_ASSIGN_OR_RETURN(Value v, interp.ApplyFilter(filter, item, rest));
    out.push_back(std::move(v));
  }
  return Value::Iterator(std::move(out));
}

Expected<Value> Sum(Interpreter& interp, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("sum", std::move(args), {"attribute", "start"}));
  EMBER_ASSIGN_OR_RETURN(Value::Items items, Iterate(in));
  Value total = Arg(b, 1, Value::Int(0));
  if (total.is_string()) return InvalidArgument("sum() can't sum strings [use ''.join(seq) instead]");
  for (Value& item : items) {
    if (b[0] && !b[0]->is_none()) {
      EMBER_ASSIGN_OR_RETURN(item, interp.GetAttributePath(item, *b[0]));
    }
    EMBER_ASSIGN_OR_RETURN(total, BinaryOp(ast::Binary::Op::kAdd, total, item));
  }
  return total;
}

Expected<Value> MinOrMax(Interpreter& interp, const Value& in, CallArgs args, bool want_max) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs(want_max ? "max" : "min", std::move(args), {"case_sensitive", "attribute"}));
  EMBER_ASSIGN_OR_RETURN(Value::Items items, Iterate(in));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  const bool case_sensitive = b[0] && Truthy(*b[0]);
  size_t best = 0;
  EMBER_ASSIGN_OR_RETURN(Value best_key, SortKey(interp, items[0], Arg(b, 1, Value::None()), case_sensitive));
  for (size_t i = 1; i < items.size(); ++i) {
    EMBER_ASSIGN_OR_RETURN(Value key, SortKey(interp, items[i], Arg(b, 1, Value::None()), case_sensitive));
    if (Equals(key, best_key)) continue;
    EMBER_ASSIGN_OR_RETURN(int c, Compare(key, best_key));
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Expected<Value> Min(Interpreter& i, const Value& in, CallArgs a) { return MinOrMax(i, in, std::move(a), false); }
Expected<Value> Max(Interpreter& i, const Value& in, CallArgs a) { return MinOrMax(i, in, std::move(a), true); }

Expected<Value> Batch(Interpreter& interp, const Value& in, CallArgs args) {
  EMBER_ASSIGN_OR_RETURN(Bound b, BindArgs("batch", std::move(args), {"linecount", "fill_with"}));
  if (!b[0] || !b[0]->is_integral() || b[0]->as_int() <= 0) return InvalidArgument("batch() needs a positive linecount");
  const auto count = static_cast<size_t>(b[0]->as_int());
  EMBER_ASSIGN_OR_RETURN(Value::Items items, Iterate(in));
  Value::Items out, row;
  for (Value& item : items) {
    if (row.size() == count) out.push_back(Value::List(std::exchange(row, {})));
    row.push_back(std::move(item));
  }
  if (!row.empty()) {
    if (b[1] && !b[1]->is_none()) {
      // Filling up to linecount builds count - row.size() copies of fill_with.
      EMBER_RETURN_IF_ERROR(interp.CheckRoom(count > INT64_MAX / sizeof(Value) ? INT64_MAX
                                                                              : static_cast<int64_t>(count * sizeof(Value))));
      row.resize(count, *b[1]);
    }
    out.push_back(Value::List(std::move(row)));
  }
  return Value::Iterator(std::move(out));
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kSequenceFilters[] = {
    {"batch", Batch},   {"count", Length},       {"dictsort", DictSort}, {"first", First},
    {"items", Items},   {"join", Join},          {"last", Last},         {"length", Length},
    {"list", List},     {"map", Map},            {"max", Max},           {"min", Min},
    {"reject", Reject}, {"rejectattr", RejectAttr}, {"reverse", Reverse}, {"select", Select},
    {"selectattr", SelectAttr}, {"sort", Sort},  {"sum", Sum},           {"unique", Unique},
};

}  // namespace

FilterFn FindSequenceFilter(std::string_view name) {
  for (const FilterEntry& e : kSequenceFilters) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

}  // namespace ember::jinja
