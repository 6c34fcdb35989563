// Prompt-lookup decoding (vLLM's `ngram` method): guess that the text repeats itself. The last n
// tokens of the request are looked up earlier in its own tokens (prompt and output), and the
// tokens that followed that earlier occurrence are the draft. No model and no state: each call
// reads the span it is given.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "spec/proposer.h"
#include "spec/speculative_config.h"

namespace ember::spec {

// The matching rule, as vLLM's `_find_longest_matched_ngram_and_propose_tokens`
// (vllm/v1/spec_decode/ngram_proposer.py): n is the longest length in [min_n, max_n] whose last-n
// n-gram occurs somewhere else in `tokens` (an occurrence may overlap the suffix, but is never the
// suffix itself, so at least one token follows it); among the occurrences of that n-gram the
// earliest wins. Fills draft.tokens with up to `max_tokens` tokens that follow it (fewer where the
// span ends first); leaves the draft empty when no n-gram of at least min_n tokens recurs.
//
// Cost: one pass over `tokens`, comparing up to max_n tokens back at each position that holds the
// last token, and stopping at the first occurrence of the max_n-gram: O(len * max_n) at worst,
// about one compare per token on ordinary text.
void ProposeByPromptLookup(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t max_tokens,
                           Draft& draft);

class NgramProposer final : public Proposer {
 public:
  explicit NgramProposer(const SpeculativeConfig& config);
  NgramProposer(int32_t min_n, int32_t max_n);

  std::string_view name() const override { return "ngram"; }

  // Confidences stay empty: a lookup has no probability of its own, and a match-count score
  // would only restate the n-gram length, which the scheduler can learn from OnVerified better.
  void Propose(std::span<const ProposalInput> inputs, std::span<Draft> drafts) override;

 private:
  int32_t min_n_;
  int32_t max_n_;
};

}  // namespace ember::spec
