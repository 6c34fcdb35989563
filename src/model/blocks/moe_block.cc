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
  const int64_t h = w.router.in_features();
  const int64_t hm = w.pre_expert_proj.out_features();
  const int64_t inter = w.experts_down.cols();
  const int64_t world = comm.world_size();
  // Rows this rank's experts may receive: its own routed rows, or under data-parallel expert
  // parallelism every rank's (each brings at most `tokens`).
  const int64_t received = o.expert_parallel() && !o.tokens_replicated ? world * routed : routed;
  using W = Workspace;
  const int64_t route = W::BytesFor<float>(tokens * e) + W::BytesFor<int32_t>(e) + W::BytesFor<int32_t>(routed) +
                        W::BytesFor<float>(routed);
  const int64_t dispatch = W::BytesFor<float>(tokens * hm) + W::BytesFor<int32_t>(e) + 2 * W::BytesFor<int64_t>(e) +
                           W::BytesFor<int64_t>(routed) + W::BytesFor<float>(routed) +
                           2 * W::BytesFor<MoeDispatch::ExpertRows>(e) + W::BytesFor<float>(routed * hm) +
                           2 * W::BytesFor<int64_t>(world) + W::BytesFor<float>(e) + W::BytesFor<float>(world * e) + W::BytesFor<int64_t>(e) +
                           W::BytesFor<MoeDispatch::RowBlock>(world * e) + 2 * W::BytesFor<float>(received * hm);
  const int64_t experts = W::BytesFor<float>(received * 2 * inter) + W::BytesFor<float>(received * inter) +
                          W::BytesFor<float>(received * hm) + 2 * W::BytesFor<ExpertWeights::Group>(e);
  const int64_t combine = W::BytesFor<float>(received * hm) + W::BytesFor<float>(routed * hm) +
                          W::BytesFor<float>(tokens * hm) + W::BytesFor<int32_t>(e);
  // TEP: this rank's block of outputs, then every rank's.
  const int64_t gather = W::BytesFor<float>((tokens / world + 1) * h) + W::BytesFor<float>((tokens + world) * h);
  return route + dispatch + experts + combine + gather;
}

void CountExpertTokens(const MoeRouting& routing, int64_t* expert_tokens) {
  for (const int32_t e : routing.chosen) ++expert_tokens[e];
}

void MoeBlock::Forward(const float* x, int64_t count, float* f, int64_t* expert_tokens) const {
  Workspace::Scope scope(ws_);
  // TEP: every rank holds the same tokens, so each sends only its block of them through the
  // experts (their work is split, not repeated) and every rank gathers all blocks' outputs. A rank
  // whose block is empty still takes part in every exchange.
  const bool split_tokens = o_.expert_parallel() && o_.tokens_replicated;
  const int64_t world = split_tokens ? comm_.world_size() : 1;
  const int64_t h = w_.router.in_features();
  const int64_t per_rank = (count + world - 1) / world;
  const int64_t begin = split_tokens ? std::min(count, comm_.rank() * per_rank) : 0;
  const int64_t mine = std::min(count, begin + per_rank) - begin;
  float* out = split_tokens ? ws_.TakeZeroed<float>(per_rank * h) : f;
  const MoeRouting routing = Route(x + begin * h, mine);
  MoeDispatch dispatch = Dispatch(x + begin * h, routing);
  if (expert_tokens != nullptr) {
    // Under expert parallelism the group's counts, which Dispatch exchanged: every rank's tokens.
    if (o_.expert_parallel()) {
      for (int64_t e = 0; e < o_.num_experts; ++e) expert_tokens[e] += dispatch.group_rows_per_expert[e];
    } else {
      CountExpertTokens(routing, expert_tokens);
    }
  }
  Experts(dispatch);
  Combine(dispatch, mine, out);
  if (!split_tokens) return;
  float* all = ws_.Take<float>(world * per_rank * h);
  comm_.AllGather(out, per_rank * h, all);
  std::copy_n(all, count * h, f);
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
  const bool ep = o_.expert_parallel();
  // The order experts' rows are sent in: by owning rank, then expert index.
  std::span<int32_t> send_order = TakeSpan<int32_t>(ws_, num_experts);
  std::iota(send_order.begin(), send_order.end(), 0);
  if (ep) {
    std::stable_sort(send_order.begin(), send_order.end(),
                     [&](int32_t a, int32_t b) { return o_.expert_owner[a] < o_.expert_owner[b]; });
  }
  int64_t* rows_of = ws_.TakeZeroed<int64_t>(num_experts);  // routed rows per expert
  for (int64_t i = 0; i < routed; ++i) ++rows_of[routing.chosen[i]];
  int64_t* next = ws_.Take<int64_t>(num_experts);  // where expert e's next row goes
  int64_t active = 0;
  for (int64_t i = 0, row = 0; i < num_experts; ++i) {
    const int32_t e = send_order[i];
    next[e] = row;
    row += rows_of[e];
    active += rows_of[e] > 0;
  }
  MoeDispatch d;
  d.latent_width = hm;
  d.token = TakeSpan<int64_t>(ws_, routed);
  d.weight = TakeSpan<float>(ws_, routed);
  d.sent = TakeSpan<MoeDispatch::ExpertRows>(ws_, active);
  for (int64_t i = 0, a = 0; i < num_experts; ++i) {
    const int32_t e = send_order[i];
    if (rows_of[e] > 0) d.sent[a++] = {e, next[e], rows_of[e]};
  }
  for (int64_t t = 0; t < count; ++t) {
    for (int64_t s = 0; s < top_k; ++s) {
      const int64_t row = next[routing.chosen[t * top_k + s]]++;
      d.token[row] = t;
      d.weight[row] = routing.weights[t * top_k + s];
    }
  }
  float* gathered = ws_.Take<float>(routed * hm);
  kernels::GatherRows(latent, hm, d.token.data(), routed, gathered);
  if (ep) return ExchangeRows(std::move(d), gathered, rows_of);

  d.experts = d.sent;
  d.send_rows = TakeSpan<int64_t>(ws_, 1);
  d.recv_rows = TakeSpan<int64_t>(ws_, 1);
  d.send_rows[0] = routed;
  d.recv_rows[0] = routed;
  if (o_.tensor_parallel) {  // every rank holds a block of every expert: the rows stay here
    d.rows = {gathered, static_cast<size_t>(routed * hm)};
    return d;
  }
  // One process: every expert is local.
  EMBER_CHECK(comm_.world_size() == 1, "MoE over {} ranks needs tensor or expert parallelism", comm_.world_size());
  d.rows = TakeSpan<float>(ws_, routed * hm);
  comm_.AllToAllV(gathered, d.send_rows, d.rows.data(), d.recv_rows, hm);
  return d;
}

MoeDispatch MoeBlock::ExchangeRows(MoeDispatch d, const float* gathered, const int64_t* rows_of) const {
  const int64_t num_experts = o_.num_experts;
  const int64_t hm = d.latent_width;
  const int world = comm_.world_size();
  d.send_rows = TakeSpan<int64_t>(ws_, world);
  std::fill(d.send_rows.begin(), d.send_rows.end(), 0);
  for (const MoeDispatch::ExpertRows& e : d.sent) d.send_rows[o_.expert_owner[e.expert]] += e.n;
  // Every rank's rows per expert, so a receiver knows how many rows of which expert each source
  // sends (row counts are exact in f32 up to 2^24).
  float* mine = ws_.Take<float>(num_experts);
  for (int64_t e = 0; e < num_experts; ++e) mine[e] = static_cast<float>(rows_of[e]);
  float* all = ws_.Take<float>(world * num_experts);
  comm_.AllGather(mine, num_experts, all);
  const auto rows_from = [&](int s, int64_t e) { return static_cast<int64_t>(all[s * num_experts + e]); };
  d.group_rows_per_expert = TakeSpan<int64_t>(ws_, num_experts);
  for (int64_t e = 0; e < num_experts; ++e) {
    d.group_rows_per_expert[e] = 0;
    for (int s = 0; s < world; ++s) d.group_rows_per_expert[e] += rows_from(s, e);
  }
  d.recv_rows = TakeSpan<int64_t>(ws_, world);
  int64_t received = 0, active = 0;
  for (int s = 0; s < world; ++s) {
    d.recv_rows[s] = 0;
    for (int64_t e = 0; e < num_experts; ++e) {
      if (o_.local_expert[e] >= 0) d.recv_rows[s] += rows_from(s, e);
    }
    received += d.recv_rows[s];
  }
  for (int64_t e = 0; e < num_experts; ++e) {
    bool any = false;
    for (int s = 0; s < world && o_.local_expert[e] >= 0; ++s) any |= rows_from(s, e) > 0;
    active += any;
  }
  float* arrived = ws_.Take<float>(received * hm);
  comm_.AllToAllV(gathered, d.send_rows, arrived, d.recv_rows, hm);

  // Regroup expert-major: expert e's rows from source 0, then source 1, ... Each source sent its
  // rows for this rank's experts in expert-index order, so source s's block of expert e starts
  // where its earlier experts' rows end.
  d.experts = TakeSpan<MoeDispatch::ExpertRows>(ws_, active);
  d.regroup = TakeSpan<MoeDispatch::RowBlock>(ws_, world * active);
  int64_t* source_next = ws_.Take<int64_t>(world);
  for (int s = 0, at = 0; s < world; at += d.recv_rows[s], ++s) source_next[s] = at;
  int64_t to = 0, a = 0, b = 0;
  for (int64_t e = 0; e < num_experts; ++e) {
    if (o_.local_expert[e] < 0) continue;
    const int64_t first = to;
    for (int s = 0; s < world; ++s) {
      const int64_t n = rows_from(s, e);
      if (n == 0) continue;
      d.regroup[b++] = {source_next[s], to, n};
      source_next[s] += n;
      to += n;
    }
    if (to > first) d.experts[a++] = {e, first, to - first};
  }
  d.regroup = d.regroup.first(b);
  d.rows = TakeSpan<float>(ws_, received * hm);
  for (const MoeDispatch::RowBlock& r : d.regroup) {
    std::copy_n(arrived + r.from * hm, r.n * hm, d.rows.data() + r.to * hm);
  }
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
    const int64_t held = o_.expert_parallel() ? o_.local_expert[e.expert] : e.expert;  // index in this rank's weights
    up_groups[i] = {held, d.rows.data() + e.first_row * hm, e.n, d.gate_up.data() + e.first_row * 2 * inter};
    down_groups[i] = {held, d.activated.data() + e.first_row * inter, e.n, d.expert_out.data() + e.first_row * hm};
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
  const int64_t received = static_cast<int64_t>(d.rows.size()) / std::max<int64_t>(hm, 1);
  // The outputs go back to the ranks that sent the rows, in the order Dispatch sent them.
  const float* returned = d.expert_out.data();
  if (o_.expert_parallel()) {
    float* outbound = ws_.Take<float>(received * hm);  // back in arrival order
    for (const MoeDispatch::RowBlock& r : d.regroup) {
      std::copy_n(d.expert_out.data() + r.to * hm, r.n * hm, outbound + r.from * hm);
    }
    float* back = ws_.Take<float>(routed * hm);
    comm_.AllToAllV(outbound, d.recv_rows, back, d.send_rows, hm);
    returned = back;
  } else if (!o_.tensor_parallel) {
    float* back = ws_.Take<float>(routed * hm);
    comm_.AllToAllV(d.expert_out.data(), d.recv_rows, back, d.send_rows, hm);
    returned = back;
  }
  // Each token adds its weighted expert outputs in expert-index order, whatever order they were
  // sent in (by owning rank under expert parallelism, already by index otherwise), so the sum is
  // one process's.
  std::span<int32_t> by_expert = TakeSpan<int32_t>(ws_, static_cast<int64_t>(d.sent.size()));
  std::iota(by_expert.begin(), by_expert.end(), 0);
  if (o_.expert_parallel()) {
    std::sort(by_expert.begin(), by_expert.end(),
              [&](int32_t a, int32_t b) { return d.sent[a].expert < d.sent[b].expert; });
  }
  float* mixed = ws_.TakeZeroed<float>(count * hm);
  for (const int32_t i : by_expert) {
    const MoeDispatch::ExpertRows& e = d.sent[i];
    kernels::ScatterAddWeightedRows(returned + e.first_row * hm, hm, d.token.data() + e.first_row,
                                    d.weight.data() + e.first_row, e.n, mixed);
  }
  w_.post_expert_proj.Apply(mixed, count, f);
}

}  // namespace ember
