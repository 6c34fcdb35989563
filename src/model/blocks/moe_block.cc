#include "model/blocks/moe_block.h"

#include <algorithm>
#include <numeric>

#include "core/check.h"
#include "core/op_trace.h"
#include "kernels/ops.h"

namespace ember {
namespace {

// Routing for one token: the top-k experts by sigmoid score + selection bias (ties: lower index),
// weighted by their unbiased scores renormalised to sum to routed_scaling_factor. `order` is
// scratch for num_experts indices.
void RouteToken(const float* scores, const float* bias, int64_t num_experts, int64_t top_k, double scaling,
                int32_t* order, int32_t* chosen, float* weights) {
  std::iota(order, order + num_experts, 0);
  std::partial_sort(order, order + top_k, order + num_experts, [&](int32_t a, int32_t b) {
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

template <typename T>
std::span<T> TakeSpan(Workspace& ws, int64_t count) {
  return {ws.Take<T>(count), static_cast<size_t>(count)};
}

}  // namespace

int64_t MoeBlock::WorkspaceBytes(const MoeWeights& w, const MoeOptions& o, int64_t tokens,
                                 const exec::Communicator& comm) {
  const int64_t e = o.num_experts;
  const int64_t routed = tokens * o.top_k;
  const int64_t hm = w.pre_expert_proj.out_features();
  const int64_t inter = w.experts_down.cols();
  const int64_t world = comm.world_size();
  using W = Workspace;
  const int64_t route = W::BytesFor<float>(tokens * e) + W::BytesFor<int32_t>(e) + W::BytesFor<int32_t>(routed) +
                        W::BytesFor<float>(routed);
  const int64_t dispatch = W::BytesFor<float>(tokens * hm) + W::BytesFor<int64_t>(e + 1) +
                           W::BytesFor<int64_t>(routed) + W::BytesFor<float>(routed) +
                           W::BytesFor<MoeDispatch::ExpertRows>(e) + 2 * W::BytesFor<float>(routed * hm) +
                           2 * W::BytesFor<int64_t>(world);
  const int64_t experts = W::BytesFor<float>(routed * 2 * inter) + W::BytesFor<float>(routed * inter) +
                          W::BytesFor<float>(routed * hm) + 2 * W::BytesFor<ExpertWeights::Group>(e);
  const int64_t combine = W::BytesFor<float>(routed * hm) + W::BytesFor<float>(tokens * hm);
  return route + dispatch + experts + combine;
}

void MoeBlock::Forward(const float* x, int64_t count, float* f) const {
  Workspace::Scope scope(ws_);
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
  MoeRouting r;
  r.count = count;
  r.top_k = top_k;
  r.chosen = TakeSpan<int32_t>(ws_, count * top_k);
  r.weights = TakeSpan<float>(ws_, count * top_k);
  // Router: f32 logits scaled by the logit multiplier, sigmoid scores.
  float* scores = ws_.Take<float>(count * num_experts);
  int32_t* order = ws_.Take<int32_t>(num_experts);
  w_.router.Apply(x, count, scores);
  kernels::ScaleInPlace(scores, count * num_experts, o_.router_logit_scale);
  kernels::SigmoidInPlace(scores, count * num_experts);
  for (int64_t t = 0; t < count; ++t) {
    RouteToken(scores + t * num_experts, w_.router_bias.data(), num_experts, top_k, o_.routed_scaling_factor, order,
               r.chosen.data() + t * top_k, r.weights.data() + t * top_k);
  }
  return r;
}

MoeDispatch MoeBlock::Dispatch(const float* x, const MoeRouting& routing) const {
  ScopedOp op("moe.dispatch");
  const int64_t count = routing.count;
  const int64_t top_k = routing.top_k;
  const int64_t hm = w_.pre_expert_proj.out_features();
  const int64_t num_experts = o_.num_experts;

  // Latent projection into the experts' width, with its zero-centred norm.
  float* latent = ws_.Take<float>(count * hm);
  w_.pre_expert_proj.Apply(x, count, latent);
  kernels::RmsNormGain(latent, count, hm, o_.latent_norm_eps, w_.pre_expert_gain.data(), latent);

  // Group the step's tokens (all requests of the batch) per expert so each expert's weights
  // stream once per step: the active experts' gathered rows [n_e, Hm] are laid out one expert after
  // the other, and gate_up and down each run as one grouped matmul over every active expert (one
  // thread-pool dispatch, not one per expert). Row i of a grouped matmul depends only on row i of
  // its input, the per-row ops are row-wise, and each token accumulates its experts' weighted
  // outputs in expert-index order into its own row (Combine), so a token's result is bitwise the
  // same whichever other tokens share the batch. The grouping is a counting sort over the
  // (token, slot) pairs in token order, so each expert's rows stay in token order.
  const int64_t routed = count * top_k;  // gathered rows over all experts
  int64_t* first = ws_.TakeZeroed<int64_t>(num_experts + 1);  // expert e's rows: [first[e], first[e + 1])
  for (int64_t i = 0; i < routed; ++i) ++first[routing.chosen[i] + 1];
  int64_t active = 0;
  for (int64_t e = 0; e < num_experts; ++e) {
    active += first[e + 1] > 0;
    first[e + 1] += first[e];
  }
  MoeDispatch d;
  d.latent_width = hm;
  d.token = TakeSpan<int64_t>(ws_, routed);
  d.weight = TakeSpan<float>(ws_, routed);
  d.experts = TakeSpan<MoeDispatch::ExpertRows>(ws_, active);
  for (int64_t e = 0, a = 0; e < num_experts; ++e) {
    if (first[e + 1] > first[e]) d.experts[a++] = {e, first[e], first[e + 1] - first[e]};
  }
  for (int64_t t = 0; t < count; ++t) {
    for (int64_t s = 0; s < top_k; ++s) {
      const int64_t row = first[routing.chosen[t * top_k + s]]++;
      d.token[row] = t;
      d.weight[row] = routing.weights[t * top_k + s];
    }
  }
  float* gathered = ws_.Take<float>(routed * hm);
  kernels::GatherRows(latent, hm, d.token.data(), routed, gathered);

  d.send_rows = TakeSpan<int64_t>(ws_, 1);
  d.recv_rows = TakeSpan<int64_t>(ws_, 1);
  d.send_rows[0] = routed;
  d.recv_rows[0] = routed;
  if (o_.tensor_parallel) {  // every rank holds a block of every expert: the rows stay here
    d.rows = {gathered, static_cast<size_t>(routed * hm)};
    return d;
  }
  // Send each row to the rank that owns its expert. Over one process every expert is local.
  EMBER_CHECK(comm_.world_size() == 1, "MoE: expert parallelism over {} ranks is not implemented yet",
              comm_.world_size());
  d.rows = TakeSpan<float>(ws_, routed * hm);
  comm_.AllToAllV(gathered, d.send_rows, d.rows.data(), d.recv_rows, hm);
  return d;
}

void MoeBlock::Experts(MoeDispatch& d) const {
  ScopedOp op("moe.experts");
  const int64_t hm = d.latent_width;
  const int64_t inter = w_.experts_down.cols();
  const int64_t received = static_cast<int64_t>(d.rows.size()) / std::max<int64_t>(hm, 1);
  d.gate_up = TakeSpan<float>(ws_, received * 2 * inter);
  d.activated = TakeSpan<float>(ws_, received * inter);
  d.expert_out = TakeSpan<float>(ws_, received * hm);
  const int64_t active = static_cast<int64_t>(d.experts.size());
  std::span<ExpertWeights::Group> up_groups = TakeSpan<ExpertWeights::Group>(ws_, active);
  std::span<ExpertWeights::Group> down_groups = TakeSpan<ExpertWeights::Group>(ws_, active);
  for (int64_t i = 0; i < active; ++i) {
    const MoeDispatch::ExpertRows& e = d.experts[i];
    up_groups[i] = {e.expert, d.rows.data() + e.first_row * hm, e.n, d.gate_up.data() + e.first_row * 2 * inter};
    down_groups[i] = {e.expert, d.activated.data() + e.first_row * inter, e.n, d.expert_out.data() + e.first_row * hm};
  }
  w_.experts_gate_up.ApplyGrouped(up_groups);
  kernels::SwiGluHalves(d.gate_up.data(), received, inter, d.activated.data());
  w_.experts_down.ApplyGrouped(down_groups);
  // Each rank multiplied its block of the FFN features: the sum over ranks is the expert's output.
  if (o_.tensor_parallel) comm_.AllReduceSum(d.expert_out.data(), received * hm);
  // Each expert's output is normalised (gain before the weightless norm) before weighting.
  kernels::GainRmsNorm(d.expert_out.data(), received, hm, o_.post_expert_norm_eps, w_.post_expert_gain.data(),
                       d.expert_out.data());
}

void MoeBlock::Combine(const MoeDispatch& d, int64_t count, float* f) const {
  ScopedOp op("moe.combine");
  const int64_t hm = d.latent_width;
  const int64_t routed = static_cast<int64_t>(d.token.size());
  // The outputs go back to the ranks that sent the rows, in the order Dispatch sent them.
  const float* returned = d.expert_out.data();
  if (!o_.tensor_parallel) {
    float* back = ws_.Take<float>(routed * hm);
    comm_.AllToAllV(d.expert_out.data(), d.recv_rows, back, d.send_rows, hm);
    returned = back;
  }
  float* mixed = ws_.TakeZeroed<float>(count * hm);
  kernels::ScatterAddWeightedRows(returned, hm, d.token.data(), d.weight.data(), routed, mixed);
  w_.post_expert_proj.Apply(mixed, count, f);
}

}  // namespace ember
