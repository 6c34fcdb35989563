// Muse Spark forward pass (reference/muse_spark.md §1.3), f32 activations throughout.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/op_trace.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/arch/muse_spark.h"
#include "model/blocks/decoder_ends.h"

namespace ember {
namespace {

// s = alpha * s + beta * branch, per channel.
void ResidualGate(float* s, const float* branch, int64_t rows, int64_t n, const std::vector<float>& alpha,
                  const std::vector<float>& beta) {
  for (int64_t r = 0; r < rows; ++r) {
    float* sr = s + r * n;
    const float* br = branch + r * n;
    for (int64_t i = 0; i < n; ++i) sr[i] = alpha[i] * sr[i] + beta[i] * br[i];
  }
}

// Routing for one token: the top-k experts by sigmoid score + selection bias (ties: lower index),
// weighted by their unbiased scores renormalised to sum to routed_scaling_factor.
void RouteToken(const float* scores, const float* bias, int64_t num_experts, int64_t top_k, double scaling,
                int32_t* chosen, float* weights) {
  std::vector<int32_t> order(num_experts);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
    const float sa = scores[a] + bias[a];
    const float sb = scores[b] + bias[b];
    return sa > sb || (sa == sb && a < b);
  });
  float sum = 0.0f;
  for (int64_t s = 0; s < top_k; ++s) sum += scores[order[s]];
  for (int64_t s = 0; s < top_k; ++s) {
    chosen[s] = order[s];
    weights[s] = scores[order[s]] / (sum + 1e-15f) * static_cast<float>(scaling);
  }
}

}  // namespace

Status MuseSparkModel::Forward(const ForwardBatch& batch, KvStore& kv, ForwardOutput* out) {
  EMBER_RETURN_IF_ERROR(CheckForwardBatch(*this, batch, kv));
  const MuseSparkConfig& c = config_;
  const int64_t h = c.hidden_size;
  const int64_t count = batch.num_tokens();

  // Embedding: the table row with a weightless RMSNorm (transformers' normed embedding module).
  std::vector<float> residual(count * h);
  EMBER_RETURN_IF_ERROR(EmbedInputs(embed_tokens_, {.norm_eps = static_cast<float>(c.rms_norm_eps)}, batch, h,
                                    residual.data()));

  const AttentionStep step(batch, kv);
  HiddenStateTap tap(batch, h, out);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    ScopedOp op("decoder", l);
    AttentionBlock(layers_[l], l, step, residual.data());
    FeedForwardBlock(layers_[l], count, residual.data());
    tap.AfterLayer(l, residual.data());
  }

  // Final norm (absolute gain) and the softcapped, output-multiplied logits of the requested rows.
  HeadOptions head;
  head.norm_eps = static_cast<float>(c.rms_norm_eps);
  head.final_gain = final_gain_.data();
  head.logit_scale = static_cast<float>(c.output_multiplier);
  head.logit_softcap = static_cast<float>(c.final_logit_softcapping);
  RunHead(head, lm_head_, batch, h, residual.data(), out);
  return Status::Ok();
}

void MuseSparkModel::AttentionBlock(const MuseSparkLayer& layer, int64_t l, const AttentionStep& step,
                                    float* residual) {
  const MuseSparkConfig& c = config_;
  const int64_t h = c.hidden_size;
  const int64_t count = step.batch.num_tokens();
  std::vector<float> x(count * h), out(count * h);
  kernels::RmsNormGain(residual, count, h, static_cast<float>(c.rms_norm_eps), layer.input_gain.data(), x.data());
  RunAttention(layer.attention, layer.attention_options, l, x.data(), step, out.data());
  // Weightless post-attention norm (post_norm_eps), then the residual gate.
  kernels::RmsNorm(out.data(), count, h, static_cast<float>(c.post_norm_eps), out.data());
  ResidualGate(residual, out.data(), count, h, layer.attn_alpha, layer.attn_beta);
}

void MuseSparkModel::FeedForwardBlock(const MuseSparkLayer& layer, int64_t count, float* residual) {
  const MuseSparkConfig& c = config_;
  const int64_t h = c.hidden_size;
  std::vector<float> x(count * h), f(count * h);
  kernels::RmsNormGain(residual, count, h, static_cast<float>(c.rms_norm_eps), layer.pre_ffn_gain.data(), x.data());
  if (!layer.experts_gate_up.empty()) {  // sparse layer
    MoE(layer, x.data(), count, f.data());
  } else {
    DenseMlp(layer, x.data(), count, f.data());
  }
  // Input-scaled post-FFN norm: the gain multiplies before the weightless normalisation.
  kernels::GainRmsNorm(f.data(), count, h, static_cast<float>(c.post_norm_eps), layer.post_ffn_gain.data(),
                       f.data());
  ResidualGate(residual, f.data(), count, h, layer.ffn_alpha, layer.ffn_beta);
}

void MuseSparkModel::MoE(const MuseSparkLayer& layer, const float* x, int64_t count, float* f) {
  const MuseSparkConfig& c = config_;
  const int64_t num_experts = c.num_local_experts;
  const int64_t top_k = c.num_experts_per_tok;
  const int64_t hm = c.moe_hidden_size;
  const int64_t inter = c.moe_intermediate_size;

  ScopedOp op("moe.route");
  // Router: f32 logits scaled by the output multiplier, sigmoid scores.
  std::vector<float> scores(count * num_experts);
  layer.router.Apply(x, count, scores.data());
  for (float& z : scores) z *= static_cast<float>(c.output_multiplier);
  kernels::SigmoidInPlace(scores.data(), count * num_experts);
  std::vector<int32_t> chosen(count * top_k);
  std::vector<float> weights(count * top_k);
  for (int64_t t = 0; t < count; ++t) {
    RouteToken(scores.data() + t * num_experts, layer.router_bias.data(), num_experts, top_k,
               c.routed_scaling_factor, chosen.data() + t * top_k, weights.data() + t * top_k);
  }

  // Latent projection into the experts' width, with its zero-centred norm.
  std::vector<float> latent(count * hm);
  layer.pre_expert_proj.Apply(x, count, latent.data());
  kernels::RmsNormGain(latent.data(), count, hm, static_cast<float>(c.rms_norm_eps), layer.pre_expert_gain.data(),
                       latent.data());

  // Group the step's tokens (all requests of the batch) per expert so each expert's weights
  // stream once per step: the active experts' gathered rows [n_e, Hm] are laid out one expert after
  // the other, and gate_up and down each run as one grouped matmul over every active expert (one
  // thread-pool dispatch, not one per expert). Row i of a grouped matmul depends only on row i of
  // its input, the per-row ops are row-wise, and each token accumulates its experts' weighted
  // outputs in expert-index order into its own row, so a token's result is bitwise the same
  // whichever other tokens share the batch.
  std::vector<std::vector<std::pair<int64_t, float>>> assigned(num_experts);
  for (int64_t t = 0; t < count; ++t) {
    for (int64_t s = 0; s < top_k; ++s) assigned[chosen[t * top_k + s]].push_back({t, weights[t * top_k + s]});
  }
  const int64_t routed = count * top_k;  // gathered rows over all experts
  std::vector<float> gathered(routed * hm), gate_up(routed * 2 * inter), activated(routed * inter),
      expert_out(routed * hm);
  std::vector<ExpertWeights::Group> up_groups, down_groups;
  std::vector<int64_t> first_row;  // per active expert, its first row in the gathered layout
  int64_t row = 0;
  for (int64_t e = 0; e < num_experts; ++e) {
    const auto& tokens = assigned[e];
    if (tokens.empty()) continue;
    const int64_t n = static_cast<int64_t>(tokens.size());
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(latent.begin() + tokens[i].first * hm, hm, gathered.begin() + (row + i) * hm);
    }
    up_groups.push_back({e, gathered.data() + row * hm, n, gate_up.data() + row * 2 * inter});
    down_groups.push_back({e, activated.data() + row * inter, n, expert_out.data() + row * hm});
    first_row.push_back(row);
    row += n;
  }
  ScopedOp experts_op("moe.experts");
  layer.experts_gate_up.ApplyGrouped(up_groups);
  kernels::SwiGluHalves(gate_up.data(), routed, inter, activated.data());
  layer.experts_down.ApplyGrouped(down_groups);
  // Each expert's output is normalised (gain before the weightless norm) before weighting.
  kernels::GainRmsNorm(expert_out.data(), routed, hm, static_cast<float>(c.post_norm_eps),
                       layer.post_expert_gain.data(), expert_out.data());
  ScopedOp combine_op("moe.combine");
  std::vector<float> mixed(count * hm, 0.0f);
  for (size_t a = 0; a < up_groups.size(); ++a) {
    const auto& tokens = assigned[up_groups[a].expert];
    for (size_t i = 0; i < tokens.size(); ++i) {
      float* dst = mixed.data() + tokens[i].first * hm;
      const float* src = expert_out.data() + (first_row[a] + static_cast<int64_t>(i)) * hm;
      const float w = tokens[i].second;
      for (int64_t j = 0; j < hm; ++j) dst[j] += w * src[j];
    }
  }
  layer.post_expert_proj.Apply(mixed.data(), count, f);
}

void MuseSparkModel::DenseMlp(const MuseSparkLayer& layer, const float* x, int64_t count, float* f) {
  ScopedOp op("mlp");
  const int64_t inter = config_.intermediate_size;
  std::vector<float> gate(count * inter), up(count * inter), act(count * inter);
  layer.mlp_gate.Apply(x, count, gate.data());
  layer.mlp_up.Apply(x, count, up.data());
  kernels::SwiGlu(gate.data(), up.data(), count, inter, act.data());
  layer.mlp_down.Apply(act.data(), count, f);
}

}  // namespace ember
