// Suffix decoding (vLLM's `suffix` method, from Snowflake's ArcticInference; paper
// "SuffixDecoding", arXiv 2411.04975): guess the continuation that most often followed the
// current suffix, in this request's own tokens (prompt and output) and in the outputs of recently
// completed requests. Agentic and templated workloads repeat themselves across requests, which a
// prompt lookup alone cannot see.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "spec/proposer.h"
#include "spec/speculative_config.h"
#include "spec/suffix_trie.h"

namespace ember::spec {

struct SuffixSpeculation {
  float max_spec_factor = 1.0f;  // a match of m tokens drafts at most floor(factor * m)
  float min_token_prob = 0.1f;   // stop before a token whose path probability falls below this
};

struct SuffixCandidate {
  std::vector<int32_t> tokens;
  std::vector<float> probs;  // each token's path probability: the product of count ratios
  float score = 0;           // sum of probs: the expected number of accepted tokens
  int32_t match_len = 0;
};

// ArcticInference's rule (SuffixTree::speculate with path drafts, csrc/suffix_decoding/
// suffix_tree.cc): for every match length m from 1 up to min(len, depth) - 1, while the last m
// tokens of `context` occur in `trie`, walk down from that node taking the most frequent child
// (the smallest token among equals), multiplying the probability by count(child) / count(node),
// and stop before a token whose probability falls below min_token_prob, at a leaf, or after
// min(max_tokens, floor(m * max_spec_factor)) tokens. The candidate with the highest score wins;
// among equals the longer match. Cost: O(depth^2) lookups for the matches plus O(depth *
// max_tokens * children) for the walks.
SuffixCandidate SpeculateFromTrie(const SuffixTrie& trie, std::span<const int32_t> context, int32_t max_tokens,
                                  const SuffixSpeculation& rule);

class SuffixProposer final : public Proposer {
 public:
  explicit SuffixProposer(const SpeculativeConfig& config);

  std::string_view name() const override { return "suffix"; }

  // Brings each request's trie up to its span (appending only the new tokens), then drafts from
  // the request's trie and the global one: the global candidate replaces the request's only
  // with a strictly higher score (ArcticInference's SuffixDecodingCache.speculate).
  // Confidences are the drafted tokens' path probabilities.
  void Propose(std::span<const ProposalInput> inputs, std::span<Draft> drafts) override;

  // Drops the request's trie; a completed request's output (not its prompt, as ArcticInference
  // caches responses) joins the global trie, evicting the oldest beyond max_cached_requests.
  void OnReleased(RequestId req, std::span<const int32_t> tokens, int64_t num_prompt_tokens, bool completed) override;

  size_t num_active_requests() const { return requests_.size(); }
  size_t num_cached_requests() const { return cached_outputs_.size(); }
  const SuffixTrie& global_trie() const { return global_; }

 private:
  struct RequestState {
    explicit RequestState(int32_t depth) : trie(depth), seq(trie.Open()) {}
    SuffixTrie trie;
    SuffixTrie::SeqId seq;  // the request's tokens seen so far, held (and kept open) by the trie
  };

  // The request's state, holding exactly `tokens` (rebuilt when they do not extend what it saw).
  RequestState& Sync(RequestId req, std::span<const int32_t> tokens);

  int32_t max_depth_;
  int32_t max_cached_requests_;
  SuffixSpeculation rule_;
  std::unordered_map<RequestId, RequestState> requests_;
  SuffixTrie global_;
  std::deque<SuffixTrie::SeqId> cached_outputs_;  // oldest first, held by global_
};

}  // namespace ember::spec
