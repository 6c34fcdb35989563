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

// One block of the drafter's last ForwardBlocks to draft: its first `num_tokens` positions, chosen
// as `sampling` says (or replaying `forced` tokens when not empty, to score a given path).
struct MarkovBlock {
  size_t b = 0;  // the block's index in that ForwardBlocks call
  int32_t anchor_token = 0;
  int32_t num_tokens = 0;
  std::span<const int32_t> forced;
  DraftSampling sampling;
  BlockDraft* out = nullptr;
};

class MarkovStage {
 public:
  explicit MarkovStage(const DSparkDrafter& drafter);

  // Every block's draft, the blocks in lockstep: position k of all blocks still drafting, then
  // k + 1. Each position's low-rank products (W2, and the gate) are one matmul over those blocks,
  // not one per block, and every row of a matmul has the bits it has alone, so a block's draft
  // does not depend on the others. A block stops early when a confidence falls below
  // `min_confidence` (that position is not drafted). `keep_logits` also returns each position's
  // corrected logits (tests).
  void DraftBlocks(std::span<const MarkovBlock> blocks, float min_confidence, bool keep_logits);
  // One block: DraftBlocks of {b, anchor_token, num_tokens, forced, sampling, out}.
  void Draft(size_t b, int32_t anchor_token, int32_t num_tokens, std::span<const int32_t> forced,
             float min_confidence, bool keep_logits, BlockDraft* out, const DraftSampling& sampling = {});

 private:
  // Rows i < n of embed_ (e = W1[prev], gated in place for a gated head) times W2 into bias_, for
  // blocks whose position-k hidden states are hidden[i].
  void LowRankBias(int64_t n, std::span<const std::span<const float>> hidden);
  float ConfidenceLogit(std::span<const float> h, const float* embed) const;
  // Draws from q_ = softmax(logits / temperature) by inverse CDF in draft-id order; returns the
  // draft id.
  int32_t SampleToken(std::span<const float> logits, float temperature, double u);

  const DSparkDrafter& drafter_;
  const DSparkConfig& config_;
  const DSparkWeights& weights_;
  // Scratch reused across calls (the engine thread only), rows per block drafting a position.
  std::vector<float> embed_;    // [blocks, r]
  std::vector<float> gate_in_;  // [blocks, H + r]
  std::vector<float> gated_;    // [blocks, r]
  std::vector<float> bias_;     // [blocks, draft V]
  std::vector<float> logits_;   // [draft V] one block's corrected logits
  std::vector<float> q_;        // [draft V] softmax(logits_ / T) of a sampled position
  std::vector<size_t> active_;  // blocks drafting the current position
  std::vector<int32_t> prev_;   // per block, the token before the current position
  std::vector<std::span<const float>> hidden_;
};

}  // namespace ember::spec::dspark
