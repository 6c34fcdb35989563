#include "spec/dspark/markov_head.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/counter_random.h"
#include "kernels/ops.h"
#include "spec/draft_model_proposer.h"

namespace ember::spec::dspark {

MarkovStage::MarkovStage(const DSparkDrafter& drafter)
    : drafter_(drafter), config_(drafter.config()), weights_(drafter.weights()) {
  const int64_t r = config_.markov_rank;
  embed_.resize(r);
  gate_in_.resize(config_.hidden_size + r);
  gated_.resize(r);
}

namespace {
// The drafter's stream of uniforms, apart from the sampler's and the verifier's.
constexpr uint64_t kDraftStream = 0x64737061726b2d71ull;  // "dspark-q"
}  // namespace

int32_t MarkovStage::SampleToken(float temperature, double u) {
  q_.resize(logits_.size());
  const float max = *std::max_element(logits_.begin(), logits_.end());
  double total = 0.0;
  for (size_t v = 0; v < logits_.size(); ++v) {
    q_[v] = std::exp((logits_[v] - max) / temperature);
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

void MarkovStage::Correct(std::span<const float> base, std::span<const float> h) {
  logits_.assign(base.begin(), base.end());
  if (config_.markov_head_type == MarkovHeadType::kNone) return;
  const float* e = embed_.data();
  if (config_.markov_head_type == MarkovHeadType::kGated) {
    std::copy(h.begin(), h.end(), gate_in_.begin());
    std::copy(embed_.begin(), embed_.end(), gate_in_.begin() + config_.hidden_size);
    weights_.markov_gate.Apply(gate_in_.data(), 1, gated_.data());
    kernels::AddInPlace(gated_.data(), weights_.markov_gate_bias.data(), config_.markov_rank);
    kernels::SigmoidInPlace(gated_.data(), config_.markov_rank);
    kernels::MulInPlace(gated_.data(), embed_.data(), config_.markov_rank);
    e = gated_.data();
  }
  bias_.resize(logits_.size());
  drafter_.markov_w2().Apply(e, 1, bias_.data());
  const float scale = config_.logit_scale;
  for (size_t v = 0; v < logits_.size(); ++v) logits_[v] += scale * bias_[v];
}

float MarkovStage::ConfidenceLogit(std::span<const float> h) const {
  const std::vector<float>& w = weights_.confidence_weight;
  float z = weights_.confidence_bias;
  const int64_t hidden = config_.hidden_size;
  for (int64_t i = 0; i < hidden; ++i) z += w[i] * h[i];
  if (config_.confidence_head_with_markov) {
    for (int64_t i = 0; i < config_.markov_rank; ++i) z += w[hidden + i] * embed_[i];
  }
  return z;
}

void MarkovStage::Draft(size_t b, int32_t anchor_token, int32_t num_tokens, std::span<const int32_t> forced,
                        float min_confidence, bool keep_logits, BlockDraft* out, const DraftSampling& sampling) {
  EMBER_CHECK(num_tokens >= 0 && num_tokens <= config_.block_size);
  EMBER_CHECK(forced.empty() || static_cast<int32_t>(forced.size()) >= num_tokens);
  out->Clear();
  int32_t prev = anchor_token;
  for (int32_t k = 0; k < num_tokens; ++k) {
    const std::span<const float> h = drafter_.Hidden(b, k);
    if (config_.markov_rank > 0) {
      const Status read = weights_.markov_w1.ReadRow(prev, embed_.data());
      EMBER_CHECK(read.ok(), "DSpark: Markov embedding of token {}: {}", prev, read.message());
    }
    Correct(drafter_.BaseLogits(b, k), h);
    const bool sampled = forced.empty() && sampling.temperature > 0.0f;
    // Logits are indexed by draft id (the token id without a draft vocabulary).
    const int64_t draft_id =
        !forced.empty() ? drafter_.DraftIdOf(forced[k])
        : sampled       ? SampleToken(sampling.temperature, SamplingUniform(sampling.seed ^ kDraftStream, sampling.first_index + k))
                        : GreedyToken(logits_);
    const int32_t token = !forced.empty() ? forced[k] : drafter_.TokenOf(draft_id);
    float z = 0.0f;
    float confidence = 0.0f;
    if (config_.enable_confidence_head) {
      z = ConfidenceLogit(h);
      confidence = 1.0f / (1.0f + std::exp(-z / config_.confidence_temperatures[k]));
    } else {
      // Without a confidence head the drafter's own probability of its token is the best guess.
      confidence = draft_id < 0 ? 0.0f : SoftmaxProbability(logits_, static_cast<int32_t>(draft_id));
    }
    // The static threshold mode (llama.cpp's --spec-draft-conf-min, DeepSpec's
    // _confident_prefix_length): the draft ends before the first unconfident position.
    if (confidence < min_confidence) break;
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
    prev = token;
  }
}

}  // namespace ember::spec::dspark
