// Muse Spark forward pass (reference/muse_spark.md §1.3), f32 activations throughout, every
// buffer from the model's step workspace.
#include <algorithm>

#include "core/op_trace.h"
#include "kernels/ops.h"
#include "model/arch/muse_spark.h"
#include "model/blocks/decoder_ends.h"
#include "model/blocks/moe_block.h"

namespace ember {

int64_t MuseSparkModel::WorkspaceBytes(const StepLimits& limits) const {
  const int64_t tokens = limits.max_tokens;
  int64_t block = 0;  // the most any layer's attention, MLP or MoE takes
  for (const MuseSparkLayer& l : layers_) {
    block = std::max(block, AttentionWorkspaceBytes(l.attention, l.attention_options, tokens));
    block = std::max(block, l.moe.empty() ? MlpWorkspaceBytes(l.mlp, tokens)
                                          : MoeBlock::WorkspaceBytes(l.moe, l.moe_options, tokens, moe_comm_));
  }
  return DecoderWorkspaceBytes(tokens, limits.max_logit_rows, config_.hidden_size, block, vocab_);
}

Status MuseSparkModel::DrafterEmbedToken(int32_t token, float* out) const {
  if (token < 0 || token >= info_.vocab_size) return InvalidArgument("token " + std::to_string(token) + " is outside the vocabulary");
  if (vocab_.sharded() || embed_tokens_.empty()) {
    return Unimplemented("drafters that share the target's embedding need it whole: run without tensor or pipeline "
                         "parallelism");
  }
  // The table row without the embedding norm (CausalLM::DrafterEmbedToken says why).
  return ember::EmbedToken(embed_tokens_, {}, token, config_.hidden_size, out);
}

Status MuseSparkModel::ApplyFinalNorm(const float* x, int64_t rows, float* out) const {
  kernels::RmsNormGain(x, rows, config_.hidden_size, static_cast<float>(config_.rms_norm_eps), final_gain_.data(), out);
  return Status::Ok();
}

Status MuseSparkModel::Forward(const ForwardBatch& batch, KvStore& kv, ForwardOutput* out) {
  EMBER_RETURN_IF_ERROR(CheckForwardBatch(*this, batch, kv));
  const MuseSparkConfig& c = config_;
  const int64_t h = c.hidden_size;
  const int64_t count = batch.num_tokens();
  const PipelineStage& stage = options_.pipeline;
  if (stage.comm != nullptr && !batch.hidden_state_layers.empty()) {
    return Unimplemented("hidden states (DSpark) are not available under pipeline parallelism");
  }
  Workspace::Scope scope(workspace_);

  // Embedding: the table row with a weightless RMSNorm (transformers' normed embedding module),
  // or the stage before's residual stream.
  float* residual = workspace_.Take<float>(count * h);
  if (stage.first()) {
    EMBER_RETURN_IF_ERROR(
        EmbedInputs(embed_tokens_, {.norm_eps = static_cast<float>(c.rms_norm_eps)}, vocab_, batch, h, comm_, residual));
  } else {
    ReceiveResidual(stage, residual, count * h);
  }

  const StepContext step(batch, kv, comm_, workspace_);
  HiddenStateTap tap(batch, h, out);
  // Expert load: one row of counters per sparse layer this stage runs, in layer order.
  exec::ExpertLoad& load = out->expert_load;
  load.Shape(c.num_local_experts, c.num_experts_per_tok, counted_layers_);
  size_t load_row = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (!stage.holds(l)) continue;
    ScopedOp op("decoder", l);
    AttentionBlock(layers_[l], l, step, residual);
    const bool sparse = load_row < load.num_rows() && load.layers[load_row] == l;
    FeedForwardBlock(layers_[l], step, residual, sparse ? load.row(load_row++).data() : nullptr);
    tap.AfterLayer(l, residual);
  }
  if (!stage.last()) {
    SendResidual(stage, residual, count * h);
    return Status::Ok();  // the sampling rank collects the logits with ReceiveLogits
  }

  // Final norm (absolute gain) and the softcapped, output-multiplied logits of the requested rows.
  HeadOptions head;
  head.norm_eps = static_cast<float>(c.rms_norm_eps);
  head.final_gain = final_gain_.data();
  head.logit_scale = static_cast<float>(c.output_multiplier);
  head.logit_softcap = static_cast<float>(c.final_logit_softcapping);
  RunHead(head, lm_head_, vocab_, step, residual, out);
  return Status::Ok();
}

Status MuseSparkModel::ForwardWithoutTokens(ForwardOutput* out) {
  if (!expert_parallel_ || moe_options_.tokens_replicated) {
    return Unimplemented("ForwardWithoutTokens runs only the MoE exchanges of data-parallel expert parallelism");
  }
  const MuseSparkConfig& c = config_;
  Workspace::Scope scope(workspace_);
  // MoeBlock reads no row of an empty batch; a valid pointer all the same.
  float* none = workspace_.Take<float>(c.hidden_size);
  exec::ExpertLoad& load = out->expert_load;
  load.Shape(c.num_local_experts, c.num_experts_per_tok, counted_layers_);
  size_t load_row = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (!options_.pipeline.holds(l) || layers_[l].moe.empty()) continue;
    ScopedOp op("decoder", l);
    const bool counted = load_row < load.num_rows() && load.layers[load_row] == l;
    MoeBlock(layers_[l].moe, layers_[l].moe_options, moe_comm_, workspace_)
        .Forward(none, 0, none, counted ? load.row(load_row++).data() : nullptr);
  }
  return Status::Ok();
}

Status MuseSparkModel::ReceiveLogits(int64_t rows, ForwardOutput* out) {
  if (!logits_arrive_later()) return InvalidArgument("ReceiveLogits on a rank no logits are sent to");
  ember::ReceiveLogits(options_.pipeline, rows, config_.vocab_size, out);
  return Status::Ok();
}

Status MuseSparkModel::SendLogits(const ForwardOutput& out) {
  if (!sends_logits()) return InvalidArgument("SendLogits on a rank that does not send them");
  ember::SendLogits(options_.pipeline, out);
  return Status::Ok();
}

void MuseSparkModel::AttentionBlock(const MuseSparkLayer& layer, int64_t l, const StepContext& step,
                                    float* residual) {
  const MuseSparkConfig& c = config_;
  const int64_t h = c.hidden_size;
  const int64_t count = step.num_tokens();
  Workspace::Scope scope(step.workspace);
  float* x = step.workspace.Take<float>(count * h);
  float* out = step.workspace.Take<float>(count * h);
  kernels::RmsNormGain(residual, count, h, static_cast<float>(c.rms_norm_eps), layer.input_gain.data(), x);
  RunAttention(layer.attention, layer.attention_options, l, x, step, out);
  // Weightless post-attention norm (post_norm_eps), then the residual gate.
  kernels::RmsNorm(out, count, h, static_cast<float>(c.post_norm_eps), out);
  kernels::ResidualGate(residual, out, count, h, layer.attn_alpha.data(), layer.attn_beta.data());
}

void MuseSparkModel::FeedForwardBlock(const MuseSparkLayer& layer, const StepContext& step, float* residual,
                                      int64_t* expert_tokens) {
  const MuseSparkConfig& c = config_;
  const int64_t h = c.hidden_size;
  const int64_t count = step.num_tokens();
  Workspace::Scope scope(step.workspace);
  float* x = step.workspace.Take<float>(count * h);
  float* f = step.workspace.Take<float>(count * h);
  kernels::RmsNormGain(residual, count, h, static_cast<float>(c.rms_norm_eps), layer.pre_ffn_gain.data(), x);
  if (!layer.moe.empty()) {  // sparse layer: the latent MoE (model/blocks/moe_block.h)
    MoeBlock(layer.moe, layer.moe_options, moe_comm_, step.workspace).Forward(x, count, f, expert_tokens);
  } else {
    RunMlp(layer.mlp, GatedActivation::kSilu, x, count, step, f);
  }
  // Input-scaled post-FFN norm: the gain multiplies before the weightless normalisation.
  kernels::GainRmsNorm(f, count, h, static_cast<float>(c.post_norm_eps), layer.post_ffn_gain.data(), f);
  kernels::ResidualGate(residual, f, count, h, layer.ffn_alpha.data(), layer.ffn_beta.data());
}

}  // namespace ember
