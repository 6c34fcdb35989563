#include "spec/suffix_proposer.h"

#include <algorithm>

#include "core/check.h"

namespace ember::spec {
namespace {

// Tokens compared to decide that a span extends what a request's trie saw: the first and last
// ones seen. The engine only grows a request's tokens or replaces them wholesale (a recompute or
// a reused id), both of which change the ends; checking every token would make each step
// O(context). A span that differed only in the middle would keep a stale trie, which costs only
// draft quality: verification never trusts a draft.
constexpr size_t kEndsCompared = 32;

bool Extends(std::span<const int32_t> tokens, std::span<const int32_t> seen) {
  if (tokens.size() < seen.size()) return false;
  const size_t n = std::min(seen.size(), kEndsCompared);
  return std::equal(seen.begin(), seen.begin() + n, tokens.begin()) &&
         std::equal(seen.end() - n, seen.end(), tokens.begin() + (seen.size() - n));
}

// The greedy path below `node` (the match of `match_len` tokens).
SuffixCandidate WalkMostFrequent(const SuffixTrie& trie, SuffixTrie::NodeId node, int32_t match_len, int32_t budget,
                                 float min_token_prob) {
  SuffixCandidate c;
  c.match_len = match_len;
  float prob = 1.0f;
  while (static_cast<int32_t>(c.tokens.size()) < budget) {
    const SuffixTrie::NodeId child = trie.MostFrequentChild(node);
    if (child == SuffixTrie::kNone) break;
    prob *= static_cast<float>(trie.count(child)) / static_cast<float>(trie.count(node));
    if (prob < min_token_prob) break;
    c.tokens.push_back(trie.token(child));
    c.probs.push_back(prob);
    c.score += prob;
    node = child;
  }
  return c;
}

}  // namespace

SuffixCandidate SpeculateFromTrie(const SuffixTrie& trie, std::span<const int32_t> context, int32_t max_tokens,
                                  const SuffixSpeculation& rule) {
  SuffixCandidate best;
  const int64_t longest = std::min<int64_t>(static_cast<int64_t>(context.size()), trie.max_depth()) - 1;
  for (int32_t m = 1; m <= longest; ++m) {
    const SuffixTrie::NodeId node = trie.Find(context.last(m));
    if (node == SuffixTrie::kNone) break;  // a longer suffix cannot occur either
    // ArcticInference's rounding: the product, nudged up so that e.g. 3 * (1/3) gives 1.
    const int32_t budget =
        std::min(max_tokens, static_cast<int32_t>(static_cast<float>(m) * rule.max_spec_factor + 1e-6f));
    if (budget <= 0) continue;
    SuffixCandidate c = WalkMostFrequent(trie, node, m, budget, rule.min_token_prob);
    if (c.score >= best.score) best = std::move(c);
  }
  return best;
}

SuffixProposer::SuffixProposer(const SpeculativeConfig& config)
    : max_depth_(config.suffix_max_tree_depth),
      max_cached_requests_(config.suffix_max_cached_requests),
      rule_{.max_spec_factor = config.suffix_max_spec_factor, .min_token_prob = config.suffix_min_token_prob},
      global_(config.suffix_max_tree_depth) {
  EMBER_CHECK(max_cached_requests_ >= 0);
}

SuffixProposer::RequestState& SuffixProposer::Sync(RequestId req, std::span<const int32_t> tokens) {
  auto it = requests_.find(req);
  if (it != requests_.end() && !Extends(tokens, it->second.trie.tokens(it->second.seq))) {
    requests_.erase(it);
    it = requests_.end();
  }
  if (it == requests_.end()) it = requests_.try_emplace(req, max_depth_).first;
  RequestState& state = it->second;
  for (size_t i = state.trie.tokens(state.seq).size(); i < tokens.size(); ++i) state.trie.Append(state.seq, tokens[i]);
  return state;
}

void SuffixProposer::Propose(std::span<const ProposalInput> inputs, std::span<Draft> drafts) {
  EMBER_CHECK(drafts.size() == inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ProposalInput& in = inputs[i];
    Draft& draft = drafts[i];
    draft.Clear();
    const RequestState& state = Sync(in.req, in.tokens);
    if (in.max_tokens <= 0) continue;
    SuffixCandidate best = SpeculateFromTrie(state.trie, in.tokens, in.max_tokens, rule_);
    if (!cached_outputs_.empty()) {
      SuffixCandidate global = SpeculateFromTrie(global_, in.tokens, in.max_tokens, rule_);
      if (global.score > best.score) best = std::move(global);
    }
    draft.tokens = std::move(best.tokens);
    draft.confidences = std::move(best.probs);
  }
}

void SuffixProposer::OnReleased(RequestId req, std::span<const int32_t> tokens, int64_t num_prompt_tokens,
                                bool completed) {
  requests_.erase(req);
  if (!completed || max_cached_requests_ == 0) return;
  EMBER_CHECK(num_prompt_tokens >= 0 && num_prompt_tokens <= static_cast<int64_t>(tokens.size()));
  const auto output = tokens.subspan(static_cast<size_t>(num_prompt_tokens));
  if (output.empty()) return;  // nothing to learn
  cached_outputs_.push_back(global_.Insert(output));
  while (static_cast<int64_t>(cached_outputs_.size()) > max_cached_requests_) {
    global_.Remove(cached_outputs_.front());
    cached_outputs_.pop_front();
  }
}

}  // namespace ember::spec
