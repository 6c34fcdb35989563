// Compiles ConstraintSpecs into TokenConstraints over one model's vocabulary with xgrammar, and
// caches them: requests with the same schema (an agent's tool list, repeated on every turn)
// share one compiled grammar. Thread-safe: HTTP handlers compile at admission, so an invalid
// schema is a 400 before the request reaches the engine.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "engine/token_constraint.h"
#include "structured/constraint_spec.h"

namespace ember {
class Tokenizer;
}

namespace ember::structured {

// The bytes each token id stands for, "" for special tokens (never allowed by a grammar) and for
// ids past the tokenizer's vocabulary, padded to the model's `vocab_size`.
std::vector<std::string> TokenBytes(const Tokenizer& tokenizer, int64_t vocab_size);

struct CompileStats {
  int64_t compiled = 0;     // cache misses
  int64_t cache_hits = 0;
  double last_seconds = 0;  // the last miss's compile time
};

class ConstraintCompiler {
 public:
  // `token_bytes[t]` is token t's text (TokenBytes); `stop_token_ids` end a sequence whose grammar
  // is complete (each request's matcher may add its own stop_token_ids).
  ConstraintCompiler(std::vector<std::string> token_bytes, std::vector<int32_t> stop_token_ids);
  ~ConstraintCompiler();
  ConstraintCompiler(const ConstraintCompiler&) = delete;
  ConstraintCompiler& operator=(const ConstraintCompiler&) = delete;

  // The compiled constraint, from the cache when this spec was compiled before. An invalid or
  // unsupported schema, regex or grammar is InvalidArgument with a message naming what is wrong.
  Expected<std::shared_ptr<const TokenConstraint>> Compile(const ConstraintSpec& spec);

  CompileStats stats() const;
  int64_t vocab_size() const { return vocab_size_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t vocab_size_;
  std::mutex compile_mu_;  // one compile at a time (xgrammar's compiler is shared)
  mutable std::mutex mu_;   // guards cache_ and stats_
  std::unordered_map<std::string, std::shared_ptr<const TokenConstraint>> cache_;
  CompileStats stats_;
};

}  // namespace ember::structured
