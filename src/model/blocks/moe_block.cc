#include "model/blocks/moe_block.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/check.h"
#include "core/op_trace.h"
#include "kernels/ops.h"

namespace ember {
namespace {

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

void MoeBlock::Forward(const float* x, int64_t count, float* f) const {
  const MoeRouting routing = Route(x, count);
  MoeDispatch dispatch = Dispatch(x, routing);
  Experts(dispatch);
  Combine(dispatch, count, f);
}

MoeRouting MoeBlock::Route(const float* x, int64_t count) const {
  ScopedOp op("moe.route");
  const int64_t num_experts = o_.num_experts;
  const int64_t top_k = o_.top_k;
  EMBER_CHECK(top_k > 0 && top_k <= num_experts, "MoE: top_k {} of {} experts", top_k, num_experts);
  // Router: f32 logits scaled by the logit multiplier, sigmoid scores.
  std::vector<float> scores(count * num_experts);
  w_.router.Apply(x, count, scores.data());
  kernels::ScaleInPlace(scores.data(), count * num_experts, o_.router_logit_scale);
  kernels::SigmoidInPlace(scores.data(), count * num_experts);
  MoeRouting r;
  r.count = count;
  r.top_k = top_k;
  r.chosen.resize(count * top_k);
  r.weights.resize(count * top_k);
  for (int64_t t = 0; t < count; ++t) {
    RouteToken(scores.data() + t * num_experts, w_.router_bias.data(), num_experts, top_k,
               o_.routed_scaling_factor, r.chosen.data() + t * top_k, r.weights.data() + t * top_k);
  }
  return r;
}

MoeDispatch MoeBlock::Dispatch(const float* x, const MoeRouting& routing) const {
  ScopedOp op("moe.dispatch");
  const int64_t count = routing.count;
  const int64_t top_k = routing.top_k;
  const int64_t hm = w_.pre_expert_proj.out_features();

  // Latent projection into the experts' width, with its zero-centred norm.
  std::vector<float> latent(count * hm);
  w_.pre_expert_proj.Apply(x, count, latent.data());
  kernels::RmsNormGain(latent.data(), count, hm, o_.latent_norm_eps, w_.pre_expert_gain.data(), latent.data());

  // Group the step's tokens (all requests of the batch) per expert so each expert's weights
  // stream once per step: the active experts' gathered rows [n_e, Hm] are laid out one expert after
  // the other, and gate_up and down each run as one grouped matmul over every active expert (one
  // thread-pool dispatch, not one per expert). Row i of a grouped matmul depends only on row i of
  // its input, the per-row ops are row-wise, and each token accumulates its experts' weighted
  // outputs in expert-index order into its own row (Combine), so a token's result is bitwise the
  // same whichever other tokens share the batch.
  std::vector<std::vector<std::pair<int64_t, float>>> assigned(o_.num_experts);
  for (int64_t t = 0; t < count; ++t) {
    for (int64_t s = 0; s < top_k; ++s) {
      assigned[routing.chosen[t * top_k + s]].push_back({t, routing.weights[t * top_k + s]});
    }
  }
  MoeDispatch d;
  d.latent_width = hm;
  const int64_t routed = count * top_k;  // gathered rows over all experts
  d.token.reserve(routed);
  d.weight.reserve(routed);
  for (int64_t e = 0; e < o_.num_experts; ++e) {
    if (assigned[e].empty()) continue;
    d.experts.push_back({e, static_cast<int64_t>(d.token.size()), static_cast<int64_t>(assigned[e].size())});
    for (const auto& [token, weight] : assigned[e]) {
      d.token.push_back(token);
      d.weight.push_back(weight);
    }
  }
  std::vector<float> gathered(routed * hm);
  kernels::GatherRows(latent.data(), hm, d.token.data(), routed, gathered.data());

  // Send each row to the rank that owns its expert. Over one process every expert is local.
  EMBER_CHECK(comm_.world_size() == 1, "MoE: expert parallelism over {} ranks is not implemented yet",
              comm_.world_size());
  d.send_rows = {routed};
  d.recv_rows = {routed};
  d.rows.resize(routed * hm);
  comm_.AllToAllV(gathered.data(), d.send_rows, d.rows.data(), d.recv_rows, hm);
  return d;
}

void MoeBlock::Experts(MoeDispatch& d) const {
  ScopedOp op("moe.experts");
  const int64_t hm = d.latent_width;
  const int64_t inter = w_.experts_down.cols();
  const int64_t received = static_cast<int64_t>(d.rows.size()) / std::max<int64_t>(hm, 1);
  d.gate_up.resize(received * 2 * inter);
  d.activated.resize(received * inter);
  d.expert_out.resize(received * hm);
  std::vector<ExpertWeights::Group> up_groups, down_groups;
  for (const MoeDispatch::ExpertRows& e : d.experts) {
    up_groups.push_back({e.expert, d.rows.data() + e.first_row * hm, e.n, d.gate_up.data() + e.first_row * 2 * inter});
    down_groups.push_back(
        {e.expert, d.activated.data() + e.first_row * inter, e.n, d.expert_out.data() + e.first_row * hm});
  }
  w_.experts_gate_up.ApplyGrouped(up_groups);
  kernels::SwiGluHalves(d.gate_up.data(), received, inter, d.activated.data());
  w_.experts_down.ApplyGrouped(down_groups);
  // Each expert's output is normalised (gain before the weightless norm) before weighting.
  kernels::GainRmsNorm(d.expert_out.data(), received, hm, o_.post_expert_norm_eps, w_.post_expert_gain.data(),
                       d.expert_out.data());
}

void MoeBlock::Combine(const MoeDispatch& d, int64_t count, float* f) const {
  ScopedOp op("moe.combine");
  const int64_t hm = d.latent_width;
  const int64_t routed = static_cast<int64_t>(d.token.size());
  // The outputs go back to the ranks that sent the rows, in the order Dispatch sent them.
  std::vector<float> returned(routed * hm);
  comm_.AllToAllV(d.expert_out.data(), d.recv_rows, returned.data(), d.send_rows, hm);
  std::vector<float> mixed(count * hm, 0.0f);
  kernels::ScatterAddWeightedRows(returned.data(), hm, d.token.data(), d.weight.data(), routed, mixed.data());
  w_.post_expert_proj.Apply(mixed.data(), count, f);
}

}  // namespace ember
