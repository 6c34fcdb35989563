#include "spec/ngram_proposer.h"

#include <algorithm>

#include "core/check.h"

namespace ember::spec {

void ProposeByPromptLookup(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t max_tokens,
                           Draft& draft) {
  EMBER_CHECK(min_n >= 1 && min_n <= max_n, "n-gram bounds [{}, {}]", min_n, max_n);
  draft.Clear();
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (max_tokens <= 0 || len < min_n + 1) return;  // an earlier occurrence needs min_n + 1 tokens
  const int32_t last = tokens[len - 1];

  // Scan the candidate end positions e of an earlier occurrence in increasing order (the last
  // position is the suffix itself). match(e) = how many tokens ending at e equal the tokens ending
  // the span, capped at max_n. Only a strictly longer match replaces the best, so the earliest
  // occurrence of the longest n-gram wins; a full max_n match cannot be beaten and ends the scan.
  int32_t best_len = 0;
  int64_t best_end = -1;
  const int32_t* data = tokens.data();
  for (int64_t e = 0; e < len - 1; ++e) {
    if (data[e] != last) continue;
    const int64_t cap = std::min<int64_t>(max_n, e + 1);
    int32_t match = 1;
    while (match < cap && data[e - match] == data[len - 1 - match]) ++match;
    if (match > best_len) {
      best_len = match;
      best_end = e;
      if (match == max_n) break;
    }
  }
  if (best_len < min_n) return;

  const int64_t first = best_end + 1;  // < len: the occurrence is never the suffix itself
  const int64_t count = std::min<int64_t>(max_tokens, len - first);
  draft.tokens.assign(tokens.begin() + first, tokens.begin() + first + count);
}

NgramProposer::NgramProposer(const SpeculativeConfig& config)
    : NgramProposer(config.prompt_lookup_min, config.prompt_lookup_max) {}

NgramProposer::NgramProposer(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {
  EMBER_CHECK(min_n >= 1 && min_n <= max_n, "prompt lookup bounds [{}, {}]", min_n, max_n);
}

void NgramProposer::Propose(std::span<const ProposalInput> inputs, std::span<Draft> drafts) {
  EMBER_CHECK(drafts.size() == inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    ProposeByPromptLookup(inputs[i].tokens, min_n_, max_n_, inputs[i].max_tokens, drafts[i]);
  }
}

}  // namespace ember::spec
