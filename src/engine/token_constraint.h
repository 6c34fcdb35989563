// A constraint on which tokens a request may generate next (structured outputs: a JSON schema, a
// regex, a choice, a grammar), as the engine and runner see it: an opaque compiled object that
// makes one matcher per sequence. The engine never looks inside; the runner asks the matcher for a
// mask before sampling and tells it each token after. The grammar engine behind it (xgrammar,
// src/structured) stays out of the engine's and runner's dependencies.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace ember {

// One sequence's position in the grammar. Not thread-safe; the runner uses one from one thread
// at a time (the mask may be computed on a helper thread while the forward pass runs, but never
// while a token is being accepted).
class TokenMatcher {
 public:
  virtual ~TokenMatcher() = default;
  // Writes the allowed next tokens as a bitmask: bit (t % 32) of word t / 32 is set when token t
  // may come next. `bitmask` has (vocab_size + 31) / 32 words.
  virtual void FillNextTokenBitmask(std::span<uint32_t> bitmask) = 0;
  // Advances past `token`; false (and no change) when the grammar does not allow it.
  virtual bool AcceptToken(int32_t token) = 0;
  // True once a stop token was accepted: the sequence is over.
  virtual bool IsTerminated() const = 0;
};

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // A fresh matcher at the start of the output. `stop_token_ids` end the sequence when the grammar
  // is complete (EOS, end-of-turn, the request's stop_token_ids).
  virtual std::unique_ptr<TokenMatcher> NewMatcher(std::span<const int32_t> stop_token_ids) const = 0;
  // What it is, for logs ("json_schema", "regex", ...).
  virtual const std::string& kind() const = 0;
  // The vocabulary it was compiled for (the model's, logits rows included padding).
  virtual int64_t vocab_size() const = 0;
};

}  // namespace ember
