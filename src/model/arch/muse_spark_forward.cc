// Muse Spark forward pass (reference/muse_spark.md §1.3), f32 activations throughout.
#include "core/op_trace.h"
#include "kernels/ops.h"
#include "model/arch/muse_spark.h"
#include "model/blocks/decoder_ends.h"
#include "model/blocks/moe_block.h"
#include "model/parallel_linear.h"

namespace ember {

Status MuseSparkModel::Forward(const ForwardBatch& batch, KvStore& kv, ForwardOutput* out) {
  EMBER_RETURN_IF_ERROR(CheckForwardBatch(*this, batch, kv));
  const MuseSparkConfig& c = config_;
  const int64_t h = c.hidden_size;
  const int64_t count = batch.num_tokens();

  // Embedding: the table row with a weightless RMSNorm (transformers' normed embedding module).
  std::vector<float> residual(count * h);
  EMBER_RETURN_IF_ERROR(EmbedInputs(embed_tokens_, {.norm_eps = static_cast<float>(c.rms_norm_eps)}, batch, h,
                                    residual.data()));

  const AttentionStep step(batch, kv, comm_);
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
  kernels::ResidualGate(residual, out.data(), count, h, layer.attn_alpha.data(), layer.attn_beta.data());
}

void MuseSparkModel::FeedForwardBlock(const MuseSparkLayer& layer, int64_t count, float* residual) {
  const MuseSparkConfig& c = config_;
  const int64_t h = c.hidden_size;
  std::vector<float> x(count * h), f(count * h);
  kernels::RmsNormGain(residual, count, h, static_cast<float>(c.rms_norm_eps), layer.pre_ffn_gain.data(), x.data());
  if (!layer.moe.empty()) {  // sparse layer: the latent MoE (model/blocks/moe_block.h)
    MoeBlock(layer.moe, moe_options_, comm_).Forward(x.data(), count, f.data());
  } else {
    DenseMlp(layer, x.data(), count, f.data());
  }
  // Input-scaled post-FFN norm: the gain multiplies before the weightless normalisation.
  kernels::GainRmsNorm(f.data(), count, h, static_cast<float>(c.post_norm_eps), layer.post_ffn_gain.data(),
                       f.data());
  kernels::ResidualGate(residual, f.data(), count, h, layer.ffn_alpha.data(), layer.ffn_beta.data());
}

void MuseSparkModel::DenseMlp(const MuseSparkLayer& layer, const float* x, int64_t count, float* f) {
  ScopedOp op("mlp");
  const int64_t inter = config_.intermediate_size;
  std::vector<float> gate(count * inter), up(count * inter), act(count * inter);
  // gate and up column-parallel, down row-parallel (model/parallel_linear.h).
  ColumnParallelApply(layer.mlp_gate, x, count, gate.data());
  ColumnParallelApply(layer.mlp_up, x, count, up.data());
  kernels::SwiGlu(gate.data(), up.data(), count, inter, act.data());
  RowParallelApply(layer.mlp_down, act.data(), count, f, comm_);
}

}  // namespace ember
