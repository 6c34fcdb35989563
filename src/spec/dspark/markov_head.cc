#include "spec/dspark/markov_head.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/counter_random.h"
#include "kernels/ops.h"
#include "spec/draft_model_proposer.h"

namespace ember::spec::dspark {

MarkovStage::MarkovStage(const DSparkDrafter& drafter)
    : drafter_(drafter), config_(drafter.config()), weights_(drafter.weights()) {}

namespace {
// The drafter's stream of uniforms, apart from the sampler's and the verifier's.
constexpr uint64_t kDraftStream = 0x64737061726b2d71ull;  // "dspark-q"
}  // namespace

int32_t MarkovStage::SampleToken(std::span<const float> logits, float temperature, double u) {
  q_.resize(logits.size());
  const float max = *std::max_element(logits.begin(), logits.end());
  double total = 0.0;
  for (size_t v = 0; v < logits.size(); ++v) {
    q_[v] = std::exp((logits[v] - max) / temperature);
    total += q_[v];
  }
  const float inv = static_cast<float>(1.0 / total);
  double sum = 0.0;
  for (float& q : q_) {
    q *= inv;
    sum += q;
  }
  // Inverse CDF over the normalised values themselves, so the token is drawn from exactly the q
  // handed to the verifier (their sum is 1 only up to rounding).
  const double target = u * sum;
  double cumulative = 0.0;
  int32_t last = 0;
  for (size_t v = 0; v < q_.size(); ++v) {
    if (q_[v] <= 0.0f) continue;
    cumulative += q_[v];
    last = static_cast<int32_t>(v);
    if (cumulative > target) return last;
  }
  return last;
}

void MarkovStage::LowRankBias(int64_t n, std::span<const std::span<const float>> hidden) {
  const int64_t r = config_.markov_rank;
  const int64_t h = config_.hidden_size;
  const float* e = embed_.data();
  if (config_.markov_head_type == MarkovHeadType::kGated) {
    gate_in_.resize(n * (h + r));
    gated_.resize(n * r);
    for (int64_t i = 0; i < n; ++i) {
      std::copy(hidden[i].begin(), hidden[i].end(), gate_in_.begin() + i * (h + r));
      std::copy_n(embed_.begin() + i * r, r, gate_in_.begin() + i * (h + r) + h);
    }
    weights_.markov_gate.Apply(gate_in_.data(), n, gated_.data());
    for (int64_t i = 0; i < n; ++i) {
      float* g = gated_.data() + i * r;
      kernels::AddInPlace(g, weights_.markov_gate_bias.data(), r);
      kernels::SigmoidInPlace(g, r);
      kernels::MulInPlace(g, embed_.data() + i * r, r);
    }
    e = gated_.data();
  }
  bias_.resize(n * drafter_.draft_vocab_size());
  drafter_.markov_w2().Apply(e, n, bias_.data());
}

float MarkovStage::ConfidenceLogit(std::span<const float> h, const float* embed) const {
  const std::vector<float>& w = weights_.confidence_weight;
  float z = weights_.confidence_bias;
  const int64_t hidden = config_.hidden_size;
  for (int64_t i = 0; i < hidden; ++i) z += w[i] * h[i];
  if (config_.confidence_head_with_markov) {
    for (int64_t i = 0; i < config_.markov_rank; ++i) z += w[hidden + i] * embed[i];
  }
  return z;
}

void MarkovStage::Draft(size_t b, int32_t anchor_token, int32_t num_tokens, std::span<const int32_t> forced,
                        float min_confidence, bool keep_logits, BlockDraft* out, const DraftSampling& sampling) {
  const MarkovBlock block{b, anchor_token, num_tokens, forced, sampling, out};
  DraftBlocks({&block, 1}, min_confidence, keep_logits);
}

void MarkovStage::DraftBlocks(std::span<const MarkovBlock> blocks, float min_confidence, bool keep_logits) {
  const int64_t r = config_.markov_rank;
  const bool markov = config_.markov_head_type != MarkovHeadType::kNone;
  prev_.assign(blocks.size(), 0);
  int32_t longest = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const MarkovBlock& block = blocks[i];
    EMBER_CHECK(block.num_tokens >= 0 && block.num_tokens <= config_.block_size);
    EMBER_CHECK(block.forced.empty() || static_cast<int32_t>(block.forced.size()) >= block.num_tokens);
    block.out->Clear();
    prev_[i] = block.anchor_token;
    longest = std::max(longest, block.num_tokens);
  }
  for (int32_t k = 0; k < longest; ++k) {
    // The blocks drafting position k: those that want it and have not stopped.
    active_.clear();
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (k < blocks[i].num_tokens && static_cast<int32_t>(blocks[i].out->tokens.size()) == k) active_.push_back(i);
    }
    if (active_.empty()) break;
    const auto n = static_cast<int64_t>(active_.size());
    hidden_.resize(active_.size());
    embed_.resize(n * r);
    for (int64_t a = 0; a < n; ++a) {
      hidden_[a] = drafter_.Hidden(blocks[active_[a]].b, k);
      if (r > 0) {
        const Status read = weights_.markov_w1.ReadRow(prev_[active_[a]], embed_.data() + a * r);
        EMBER_CHECK(read.ok(), "DSpark: Markov embedding of token {}: {}", prev_[active_[a]], read.message());
      }
    }
    if (markov) LowRankBias(n, hidden_);
    const float scale = config_.logit_scale;
    const int64_t vocab = drafter_.draft_vocab_size();
    for (int64_t a = 0; a < n; ++a) {
      const MarkovBlock& block = blocks[active_[a]];
      BlockDraft* out = block.out;
      const std::span<const float> base = drafter_.BaseLogits(block.b, k);
      logits_.assign(base.begin(), base.end());
      if (markov) {
        const float* bias = bias_.data() + a * vocab;
        for (int64_t v = 0; v < vocab; ++v) logits_[v] += scale * bias[v];
      }
      const bool sampled = block.forced.empty() && block.sampling.temperature > 0.0f;
      // Logits are indexed by draft id (the token id without a draft vocabulary).
      const int64_t draft_id =
          !block.forced.empty() ? drafter_.DraftIdOf(block.forced[k])
          : sampled ? SampleToken(logits_, block.sampling.temperature,
                                  SamplingUniform(block.sampling.seed ^ kDraftStream, block.sampling.first_index + k))
                    : GreedyToken(logits_);
      const int32_t token = !block.forced.empty() ? block.forced[k] : drafter_.TokenOf(draft_id);
      float z = 0.0f;
      float confidence = 0.0f;
      if (config_.enable_confidence_head) {
        z = ConfidenceLogit(hidden_[a], embed_.data() + a * r);
        confidence = 1.0f / (1.0f + std::exp(-z / config_.confidence_temperatures[k]));
      } else {
        // Without a confidence head the drafter's own probability of its token is the best guess.
        confidence = draft_id < 0 ? 0.0f : SoftmaxProbability(logits_, static_cast<int32_t>(draft_id));
      }
      // The static threshold mode (llama.cpp's --spec-draft-conf-min, DeepSpec's
      // _confident_prefix_length): the draft ends before the first unconfident position, and the
      // block drafts no further (it is no longer among the active ones).
      if (confidence < min_confidence) continue;
      if (config_.enable_confidence_head) out->confidence_logits.push_back(z);
      out->tokens.push_back(token);
      out->confidences.push_back(confidence);
      if (keep_logits) out->logits.insert(out->logits.end(), logits_.begin(), logits_.end());
      if (sampled) {
        // The verifier wants q over the whole vocabulary: 0 outside the draft vocabulary.
        const size_t first = out->probabilities.size();
        out->probabilities.resize(first + static_cast<size_t>(config_.vocab_size), 0.0f);
        for (size_t i = 0; i < q_.size(); ++i) out->probabilities[first + drafter_.TokenOf(static_cast<int64_t>(i))] = q_[i];
      }
      prev_[active_[a]] = token;
    }
  }
}

}  // namespace ember::spec::dspark
