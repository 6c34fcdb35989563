#include "spec/dspark/drafter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/op_trace.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/row_attention.h"

namespace ember::spec::dspark {

Expected<std::unique_ptr<DSparkDrafter>> DSparkDrafter::Create(DSparkConfig config, DSparkWeights weights,
                                                               SharedTargetWeights target) {
  // The drafter's own copies, when it ships them, take the place of the target's.
  if (!weights.embed_tokens.empty()) target.embed = nullptr;
  if (!weights.lm_head.empty()) target.lm_head = nullptr;
  const Linear* lm_head = target.lm_head != nullptr ? target.lm_head : &weights.lm_head;
  if ((!target.embed && weights.embed_tokens.empty()) || lm_head->empty()) {
    return InvalidArgument(
        "DSpark: the target model does not expose its token embedding and lm_head, which the drafter shares");
  }
  auto check = [&](const char* what, const Linear& m) -> Status {
    if (m.out_features() != config.vocab_size || m.in_features() != config.hidden_size) {
      return InvalidArgument(fmt::format("DSpark: the {} is [{}, {}] but the drafter needs [vocab_size {}, "
                                         "hidden_size {}]: the drafter was trained for another target",
                                         what, m.out_features(), m.in_features(), config.vocab_size,
                                         config.hidden_size));
    }
    return Status::Ok();
  };
  if (!weights.embed_tokens.empty()) EMBER_RETURN_IF_ERROR(check("drafter's embed_tokens", weights.embed_tokens));
  EMBER_RETURN_IF_ERROR(check(target.lm_head != nullptr ? "target's lm_head" : "drafter's lm_head", *lm_head));
  return std::unique_ptr<DSparkDrafter>(new DSparkDrafter(std::move(config), std::move(weights), target));
}

DSparkDrafter::DSparkDrafter(DSparkConfig config, DSparkWeights weights, SharedTargetWeights target)
    : config_(std::move(config)), weights_(std::move(weights)), target_(target) {
  if (!target_.embed) target_ = SharedTargetWeights::FromTable(&weights_.embed_tokens, target_.lm_head);
  if (target_.lm_head == nullptr) target_.lm_head = &weights_.lm_head;
  attention_.resize(config_.num_layers);
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    BlockAttentionShape& a = attention_[l];
    a.num_heads = config_.num_heads;
    a.num_kv_heads = config_.num_kv_heads;
    a.head_dim = config_.head_dim;
    a.block_size = config_.block_size;
    a.window = config_.layer_window[l];
    a.causal = config_.layer_causal[l];
    a.scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  }
  inv_freq_.resize(config_.head_dim / 2);
  kernels::RopeInverseFrequencies(config_.rope_theta, config_.head_dim, inv_freq_.data());
}

Status DSparkDrafter::UseDraftVocabulary(std::vector<int32_t> ids) {
  if (ids.empty()) return InvalidArgument("DSpark: an empty draft vocabulary");
  std::vector<int32_t> inverse(config_.vocab_size, -1);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= config_.vocab_size || inverse[ids[i]] >= 0) {
      return InvalidArgument(fmt::format("DSpark: draft vocabulary id {} is outside [0, {}) or repeated", ids[i],
                                         config_.vocab_size));
    }
    inverse[ids[i]] = static_cast<int32_t>(i);
  }
  auto lm_head = target_.lm_head->GatherRows(ids);
  if (!lm_head.ok()) {
    return Unimplemented(
        fmt::format("DSpark: a draft vocabulary needs the lm_head's rows: {}", lm_head.status().message()));
  }
  if (config_.markov_rank > 0) {
    EMBER_ASSIGN_OR_RETURN(draft_markov_w2_, weights_.markov_w2.GatherRows(ids));
  }
  draft_lm_head_ = std::move(*lm_head);
  draft_ids_ = std::move(ids);
  draft_id_of_ = std::move(inverse);
  return Status::Ok();
}

Status DSparkDrafter::QuantizeLinearsQ8_0() {
  auto quantize = [](Linear& m) -> Status {
    EMBER_ASSIGN_OR_RETURN(m, m.QuantizedQ8_0());
    return Status::Ok();
  };
  EMBER_RETURN_IF_ERROR(quantize(weights_.fc));
  for (DSparkLayerWeights& layer : weights_.layers) {
    for (Linear* m : {&layer.q, &layer.k, &layer.v, &layer.o, &layer.gate, &layer.up, &layer.down}) {
      EMBER_RETURN_IF_ERROR(quantize(*m));
    }
  }
  return Status::Ok();
}

DSparkContext DSparkDrafter::NewContext() const {
  return DSparkContext(config_.num_layers, config_.kv_width(), config_.context_window());
}

int64_t DSparkDrafter::feature_width() const {
  return static_cast<int64_t>(config_.target_layer_ids.size()) * config_.target_hidden_size;
}

void DSparkDrafter::AppendContext(const float* features, int64_t count, DSparkContext& context) {
  if (count <= 0) return;
  const int64_t kvw = config_.kv_width();
  Workspace::Scope scope(workspace_);
  int64_t* positions = workspace_.Take<int64_t>(count);
  for (int64_t i = 0; i < count; ++i) positions[i] = context.end() + i;
  float* k = workspace_.Take<float>(config_.num_layers * count * kvw);
  float* v = workspace_.Take<float>(config_.num_layers * count * kvw);
  ProjectContext(features, count, positions, k, v);
  context.Append(k, v, count);
}

void DSparkDrafter::ProjectContext(const float* features, int64_t count, const int64_t* positions, float* k,
                                   float* v) {
  if (count <= 0) return;
  ScopedOp op("dspark_context");
  const DSparkConfig& c = config_;
  const int64_t h = c.hidden_size;
  const int64_t kvw = c.kv_width();
  Workspace::Scope scope(workspace_);
  float* ctx = workspace_.Take<float>(count * h);
  weights_.fc.Apply(features, count, ctx);
  kernels::RmsNormGain(ctx, count, h, c.rms_norm_eps, weights_.hidden_norm.data(), ctx);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const DSparkLayerWeights& layer = weights_.layers[l];
    float* kl = k + l * count * kvw;
    layer.k.Apply(ctx, count, kl);
    kernels::RmsNormGain(kl, count * c.num_kv_heads, c.head_dim, c.rms_norm_eps, layer.k_norm.data(), kl);
    kernels::RopeRotateHalf(kl, count, c.num_kv_heads, c.head_dim, positions, inv_freq_.data());
    layer.v.Apply(ctx, count, v + l * count * kvw);
  }
}

void DSparkDrafter::ForwardBlocks(std::span<const Block> blocks) {
  ScopedOp op("dspark_block");
  const DSparkConfig& c = config_;
  const int64_t h = c.hidden_size;
  const int64_t g = c.block_size;
  const int64_t rows = static_cast<int64_t>(blocks.size()) * g;
  logits_row_.resize(blocks.size());
  int64_t num_logits = 0;
  for (size_t b = 0; b < blocks.size(); ++b) {
    EMBER_CHECK(blocks[b].context != nullptr && blocks[b].context->CanDraftAt(blocks[b].anchor_position));
    EMBER_CHECK(blocks[b].num_logits >= 0 && blocks[b].num_logits <= g);
    logits_row_[b] = num_logits;
    num_logits += blocks[b].num_logits;
  }
  const int64_t vocab = draft_vocab_size();
  hidden_.resize(num_logits * h);
  logits_.resize(num_logits * vocab);
  if (num_logits == 0) return;

  Workspace::Scope scope(workspace_);
  float* residual = workspace_.Take<float>(rows * h);
  int64_t* positions = workspace_.Take<int64_t>(rows);
  for (size_t b = 0; b < blocks.size(); ++b) {
    for (int64_t t = 0; t < g; ++t) {
      const int64_t row = static_cast<int64_t>(b) * g + t;
      positions[row] = blocks[b].anchor_position + t;
      const int32_t token = t == 0 ? blocks[b].anchor_token : c.mask_token_id;
      const Status read = target_.embed(token, residual + row * h);
      EMBER_CHECK(read.ok(), "DSpark: embedding row {}: {}", token, read.message());
    }
  }
  // Every layer but the last feeds the next one's keys and values, so it runs every slot. The last
  // one's keys and values still come from every slot, but only the wanted slots (num_logits, the
  // tokens asked for) need its queries, attention output, o_proj and MLP: with two of seven slots
  // wanted (what adaptive verification asks for at low load) that is ~20% of the SmolLM2
  // drafter's step. Rows are independent in every one of those ops, so a wanted slot has the
  // bits it has when every slot is computed.
  const int64_t last = c.num_layers - 1;
  for (int64_t l = 0; l < last; ++l) {
    Layer(weights_.layers[l], l, blocks, /*wanted_only=*/false, positions, residual, residual);
  }
  float* wanted = workspace_.Take<float>(num_logits * h);
  Layer(weights_.layers[last], last, blocks, /*wanted_only=*/true, positions, residual, wanted);
  kernels::RmsNormGain(wanted, num_logits, h, c.rms_norm_eps, weights_.final_norm.data(), hidden_.data());

  // The lm_head over the wanted rows only: it is the largest matmul by far (vocab x hidden).
  (draft_ids_.empty() ? *target_.lm_head : draft_lm_head_).Apply(hidden_.data(), num_logits, logits_.data());
  if (c.logit_scale != 1.0f) kernels::ScaleInPlace(logits_.data(), num_logits * vocab, c.logit_scale);
}

void DSparkDrafter::Layer(const DSparkLayerWeights& layer, int64_t index, std::span<const Block> blocks,
                          bool wanted_only, const int64_t* positions, const float* residual, float* out) {
  const DSparkConfig& c = config_;
  const int64_t h = c.hidden_size;
  const int64_t g = c.block_size;
  const int64_t rows = static_cast<int64_t>(blocks.size()) * g;
  const int64_t qw = c.q_width();
  const int64_t kvw = c.kv_width();
  Workspace::Scope scope(workspace_);
  // The query rows: block b's first slots(b) slots, from row first(b) on.
  auto slots = [&](size_t b) { return wanted_only ? static_cast<int64_t>(blocks[b].num_logits) : g; };
  auto first = [&](size_t b) { return wanted_only ? logits_row_[b] : static_cast<int64_t>(b) * g; };
  const int64_t query_rows = wanted_only ? logits_row_.back() + blocks.back().num_logits : rows;

  float* normed = workspace_.Take<float>(rows * h);
  kernels::RmsNormGain(residual, rows, h, c.rms_norm_eps, layer.input_norm.data(), normed);
  float* q = workspace_.Take<float>(query_rows * qw);
  float* k = workspace_.Take<float>(rows * kvw);
  float* v = workspace_.Take<float>(rows * kvw);
  const int64_t* query_positions = positions;
  if (query_rows == rows) {
    const Linear* qkv[] = {&layer.q, &layer.k, &layer.v};
    float* qkv_out[] = {q, k, v};
    Linear::ApplyShared(qkv, normed, rows, qkv_out);
    if (out != residual) std::copy_n(residual, rows * h, out);
  } else {
    const Linear* kv[] = {&layer.k, &layer.v};
    float* kv_out[] = {k, v};
    Linear::ApplyShared(kv, normed, rows, kv_out);
    // The query rows' inputs, positions and residual stream, gathered.
    float* query_normed = workspace_.Take<float>(query_rows * h);
    int64_t* gathered_positions = workspace_.Take<int64_t>(query_rows);
    for (size_t b = 0; b < blocks.size(); ++b) {
      const int64_t from = static_cast<int64_t>(b) * g, to = first(b), n = slots(b);
      std::copy_n(normed + from * h, n * h, query_normed + to * h);
      std::copy_n(residual + from * h, n * h, out + to * h);
      std::copy_n(positions + from, n, gathered_positions + to);
    }
    layer.q.Apply(query_normed, query_rows, q);
    query_positions = gathered_positions;
  }
  kernels::RmsNormGain(q, query_rows * c.num_heads, c.head_dim, c.rms_norm_eps, layer.q_norm.data(), q);
  kernels::RmsNormGain(k, rows * c.num_kv_heads, c.head_dim, c.rms_norm_eps, layer.k_norm.data(), k);
  kernels::RopeRotateHalf(q, query_rows, c.num_heads, c.head_dim, query_positions, inv_freq_.data());
  kernels::RopeRotateHalf(k, rows, c.num_kv_heads, c.head_dim, positions, inv_freq_.data());

  int64_t max_keys = 0;
  const BlockAttentionShape& shape = attention_[index];
  for (const Block& block : blocks) max_keys = std::max(max_keys, ScoresScratch(shape, block.context->size()));
  ThreadPool& pool = ThreadPool::Global();
  float* scores = workspace_.Take<float>(pool.num_threads() * max_keys);
  float* attn = workspace_.Take<float>(query_rows * qw);
  const int64_t tasks = static_cast<int64_t>(blocks.size()) * c.num_heads;
  pool.ParallelFor(tasks, [&](int64_t begin, int64_t end) {
    float* my_scores = scores + ThreadPool::ThreadIndex() * max_keys;
    for (int64_t task = begin; task < end; ++task) {
      const size_t b = static_cast<size_t>(task / c.num_heads);
      const Block& block = blocks[b];
      AttendBlockHead(shape, *block.context, index, block.anchor_position, task % c.num_heads, q + first(b) * qw,
                      k + static_cast<int64_t>(b) * g * kvw, v + static_cast<int64_t>(b) * g * kvw, my_scores,
                      attn + first(b) * qw, slots(b));
    }
  });
  float* branch = workspace_.Take<float>(query_rows * h);
  layer.o.Apply(attn, query_rows, branch);
  kernels::AddInPlace(out, branch, query_rows * h);

  kernels::RmsNormGain(out, query_rows, h, c.rms_norm_eps, layer.post_attention_norm.data(), normed);
  float* gate = workspace_.Take<float>(query_rows * c.intermediate_size);
  float* up = workspace_.Take<float>(query_rows * c.intermediate_size);
  const Linear* gate_up[] = {&layer.gate, &layer.up};
  float* gate_up_out[] = {gate, up};
  Linear::ApplyShared(gate_up, normed, query_rows, gate_up_out);
  kernels::SwiGlu(gate, up, query_rows, c.intermediate_size, gate);
  layer.down.Apply(gate, query_rows, branch);
  kernels::AddInPlace(out, branch, query_rows * h);
}

std::span<const float> DSparkDrafter::Hidden(size_t b, int64_t k) const {
  const int64_t h = config_.hidden_size;
  return std::span<const float>(hidden_).subspan((logits_row_[b] + k) * h, h);
}

std::span<const float> DSparkDrafter::BaseLogits(size_t b, int64_t k) const {
  const int64_t v = draft_vocab_size();
  return std::span<const float>(logits_).subspan((logits_row_[b] + k) * v, v);
}

int64_t DSparkDrafter::WorkspaceBytes(int64_t rows, int64_t blocks, int64_t context_size) const {
  const DSparkConfig& c = config_;
  auto f = [](int64_t n) { return Workspace::BytesFor<float>(n); };
  const int64_t h = c.hidden_size;
  const int64_t append = f(rows * h) + Workspace::BytesFor<int64_t>(rows) + 2 * f(c.num_layers * rows * c.kv_width());
  const int64_t r = blocks * c.block_size;
  // A layer: normed, the last layer's gathered query inputs and its branch ([rows, h] each at
  // most), gathered positions, q and attn, k and v, scores, gate and up.
  const int64_t layer = 3 * f(r * h) + Workspace::BytesFor<int64_t>(r) + 2 * f(r * c.q_width()) +
                        2 * f(r * c.kv_width()) +
                        f(ThreadPool::Global().num_threads() * c.block_size *
                          kernels::RowAttentionScratch(context_size + c.block_size)) +
                        2 * f(r * c.intermediate_size);
  // The residual stream, positions and the wanted rows' stream, beside a layer's.
  const int64_t block = 2 * f(r * h) + Workspace::BytesFor<int64_t>(r) + layer;
  return std::max(append, block);
}

}  // namespace ember::spec::dspark
