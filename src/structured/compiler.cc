#include "structured/compiler.h"

#include <fmt/format.h>

#include <chrono>
#include <exception>

#include <nlohmann/json.hpp>
#include <xgrammar/xgrammar.h>

#include "core/logging.h"
#include "structured/schema_check.h"
#include "structured/xgrammar_constraint.h"
#include "tokenizer/tokenizer.h"

namespace ember::structured {
namespace {

// Cached grammars at most; past it the cache starts over (compiles are milliseconds, and an
// adversary sending endless distinct schemas must not grow memory without bound).
constexpr size_t kMaxCached = 512;

// Compact JSON (", " and ": " separators, no free whitespace): a small model given free
// whitespace can loop on newlines until max_tokens, and the output parses either way.
constexpr bool kAnyWhitespace = false;

std::string DefaultObjectSchema() { return R"({"type": "object", "additionalProperties": true})"; }

// Parses `schema`, refuses what xgrammar would silently ignore and returns the schema to compile
// (formats tightened, schema_check.h).
Expected<std::string> CheckSchema(const std::string& schema, const char* what) {
  nlohmann::json parsed = nlohmann::json::parse(schema, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return InvalidArgument(fmt::format("{} is not valid JSON", what));
  if (!parsed.is_object() && !parsed.is_boolean()) return InvalidArgument(fmt::format("{} must be an object", what));
  if (auto unsupported = FindUnsupportedKeyword(parsed)) {
    return InvalidArgument(fmt::format("{}: {}", what, *unsupported));
  }
  TightenFormats(parsed);
  return parsed.dump();
}

xgrammar::Grammar SchemaGrammar(const std::string& schema) {
  return xgrammar::Grammar::FromJSONSchema(schema, kAnyWhitespace, std::nullopt, std::nullopt, /*strict_mode=*/true);
}

xgrammar::Grammar LiteralGrammar(const std::string& text) {
  return xgrammar::Grammar::FromEBNF("root ::= " + (text.empty() ? std::string("\"\"") : EbnfLiteral(text)));
}

}  // namespace

std::vector<std::string> TokenBytes(const Tokenizer& tokenizer, int64_t vocab_size) {
  std::vector<std::string> bytes(static_cast<size_t>(vocab_size));
  const int64_t n = std::min<int64_t>(vocab_size, tokenizer.vocab_size());
  for (int64_t t = 0; t < n; ++t) bytes[t] = tokenizer.TokenPiece(static_cast<int32_t>(t), /*skip_special=*/true);
  return bytes;
}

struct ConstraintCompiler::Impl {
  Impl(const std::vector<std::string>& vocab, const std::vector<int32_t>& stops)
      : info(vocab, xgrammar::VocabType::RAW, static_cast<int>(vocab.size()), stops),
        // One thread: compiles run on the HTTP handler's thread, which already is one of many.
        compiler(info, /*max_threads=*/1, /*cache_enabled=*/false) {}

  xgrammar::CompiledGrammar Build(const ConstraintSpec& spec) {
    using K = ConstraintSpec::Kind;
    switch (spec.kind) {
      case K::kJsonObject: return compiler.CompileJSONSchema(DefaultObjectSchema(), kAnyWhitespace);
      case K::kJsonSchema:
        return compiler.CompileJSONSchema(spec.text, kAnyWhitespace, std::nullopt, std::nullopt, true);
      case K::kRegex: return compiler.CompileRegex(spec.text);
      case K::kGrammar: return compiler.CompileGrammar(spec.text, "root");
      case K::kChoice: {
        std::string ebnf = "root ::= ";
        for (size_t i = 0; i < spec.choices.size(); ++i) {
          ebnf += (i ? " | " : "") + (spec.choices[i].empty() ? std::string("\"\"") : EbnfLiteral(spec.choices[i]));
        }
        return compiler.CompileGrammar(ebnf, "root");
      }
      case K::kToolCall: {
        std::vector<xgrammar::Grammar> alternatives;
        for (const ToolCallShape& t : spec.tool_calls) {
          const std::string schema = t.parameters_schema.empty() ? DefaultObjectSchema() : t.parameters_schema;
          alternatives.push_back(
              xgrammar::Grammar::Concat({LiteralGrammar(t.before), SchemaGrammar(schema), LiteralGrammar(t.after)}));
        }
        return compiler.CompileGrammar(alternatives.size() == 1 ? alternatives[0]
                                                                : xgrammar::Grammar::Union(alternatives));
      }
    }
    throw std::logic_error("unknown constraint kind");
  }

  xgrammar::TokenizerInfo info;
  xgrammar::GrammarCompiler compiler;
};

ConstraintCompiler::ConstraintCompiler(std::vector<std::string> token_bytes, std::vector<int32_t> stop_token_ids)
    : vocab_size_(static_cast<int64_t>(token_bytes.size())) {
  for (int32_t id : stop_token_ids) token_bytes[static_cast<size_t>(id)].clear();
  impl_ = std::make_unique<Impl>(token_bytes, stop_token_ids);
}

ConstraintCompiler::~ConstraintCompiler() = default;

Expected<std::shared_ptr<const TokenConstraint>> ConstraintCompiler::Compile(const ConstraintSpec& spec) {
  const std::string key = spec.CacheKey();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      ++stats_.cache_hits;
      return it->second;
    }
  }
  using K = ConstraintSpec::Kind;
  ConstraintSpec checked = spec;  // schemas as compiled: checked and tightened
  if (spec.kind == K::kJsonSchema) {
    EMBER_ASSIGN_OR_RETURN(checked.text, CheckSchema(spec.text, "the JSON schema"));
  }
  if (spec.kind == K::kChoice && spec.choices.empty()) return InvalidArgument("'choice' must not be empty");
  if (spec.kind == K::kToolCall) {
    if (spec.tool_calls.empty()) return InvalidArgument("no function to call");
    for (ToolCallShape& t : checked.tool_calls) {
      if (!t.parameters_schema.empty()) {
        EMBER_ASSIGN_OR_RETURN(t.parameters_schema, CheckSchema(t.parameters_schema, "a tool's parameters"));
      }
    }
  }
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const TokenConstraint> constraint;
  try {
    // The grammar engine serialises nothing between compiles; the lock is only for the cache.
    std::lock_guard<std::mutex> lock(compile_mu_);
    constraint = MakeXgrammarConstraint(impl_->Build(checked), spec.kind_name(), vocab_size_);
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("invalid {}: {}", spec.kind_name(), e.what()));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EMBER_LOG_DEBUG("compiled a {} constraint in {:.1f} ms", spec.kind_name(), seconds * 1e3);
  std::lock_guard<std::mutex> lock(mu_);
  if (cache_.size() >= kMaxCached) cache_.clear();
  cache_[key] = constraint;
  ++stats_.compiled;
  stats_.last_seconds = seconds;
  return constraint;
}

CompileStats ConstraintCompiler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace ember::structured
