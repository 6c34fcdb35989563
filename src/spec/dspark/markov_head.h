// DSpark's sequential stage (checkpoint_layout.md "Heads"): after the parallel backbone, one
// block's tokens are chosen left to right, each position's logits corrected by a low-rank bias of
// the token chosen before it, and each position scored by the confidence head:
//
//   e_k = W1[x_{k-1}]                        (x_{-1} = the anchor)
//   vanilla: B_k = W2 · e_k;   gated: B_k = W2 · (sigmoid(gate_proj([h_k; e_k])) ⊙ e_k)
//   l_k = U_k + logit_scale · B_k,  x_k = argmax l_k (ties to the lowest id, as ember's sampler;
//                                   over the draft vocabulary when the drafter has one)
//   z_k = w · [h_k; e_k] + b,       c_k = sigmoid(z_k / T_k)   (T_k: STS calibration)
//
// c_k estimates P(x_k accepted | x_0..x_{k-1} accepted); the prefix survival is their product.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "spec/dspark/drafter.h"

namespace ember::spec::dspark {

// One block's sequential stage, as computed.
struct BlockDraft {
  std::vector<int32_t> tokens;           // x_0 .. x_{n-1}
  std::vector<float> logits;             // [n, draft vocab] corrected logits l_k (only when asked)
  std::vector<float> confidence_logits;  // z_k (empty without a confidence head)
  std::vector<float> confidences;        // c_k calibrated; without a confidence head, softmax(l_k)[x_k]
  std::vector<float> probabilities;      // [n, vocab] q_k = softmax(l_k / T) when the tokens were sampled
                                         // (0 outside the draft vocabulary)

  void Clear() {
    tokens.clear();
    logits.clear();
    confidence_logits.clear();
    confidences.clear();
    probabilities.clear();
  }
};

// How a block's tokens are chosen: the argmax (temperature 0), or drawn from softmax(l_k / T) with
// the uniform SamplingUniform(seed ^ kDraftStream, first_index + k), a stream of its own so that
// the draw is independent of the verifier's (which the min(1, p/q) rule needs).
struct DraftSampling {
  float temperature = 0.0f;
  uint64_t seed = 0;
  int64_t first_index = 0;  // the sequence position of token 0
};

class MarkovStage {
 public:
  explicit MarkovStage(const DSparkDrafter& drafter);

  // The first `num_tokens` positions of block `b` of the drafter's last ForwardBlocks, chosen as
  // `sampling` says (or replaying `forced` tokens when not empty, to score a given path). Stops
  // early when a confidence falls below `min_confidence` (that position is not drafted).
  // `keep_logits` also returns each position's corrected logits (tests).
  void Draft(size_t b, int32_t anchor_token, int32_t num_tokens, std::span<const int32_t> forced,
             float min_confidence, bool keep_logits, BlockDraft* out, const DraftSampling& sampling = {});

 private:
  // e = W1[prev]; then the corrected logits of position k into logits_.
  void Correct(std::span<const float> base, std::span<const float> h);
  float ConfidenceLogit(std::span<const float> h) const;
  // Draws from q_ = softmax(logits_ / temperature) by inverse CDF in draft-id order; returns the
  // draft id.
  int32_t SampleToken(float temperature, double u);

  const DSparkDrafter& drafter_;
  const DSparkConfig& config_;
  const DSparkWeights& weights_;
  // Scratch reused across calls (the engine thread only).
  std::vector<float> embed_;    // [r]
  std::vector<float> gate_in_;  // [H + r]
  std::vector<float> gated_;    // [r]
  std::vector<float> bias_;     // [draft V]
  std::vector<float> logits_;   // [draft V]
  std::vector<float> q_;        // [draft V] softmax(logits_ / T) of a sampled position
};

}  // namespace ember::spec::dspark
