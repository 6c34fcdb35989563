#include "model/blocks/dense_decoder.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/op_trace.h"
#include "kernels/ops.h"
#include "model/blocks/decoder_ends.h"

namespace ember {

DenseDecoder::DenseDecoder(DenseDecoderSpec spec)
    : spec_(std::move(spec)), comm_(exec::OrLocal(spec_.communicator)) {
  spec_.info.hidden_size = spec_.hidden_size;
  vocab_ = spec_.vocab_shard.count > 0 ? VocabSlice{spec_.vocab_shard, spec_.info.vocab_size}
                                       : VocabSlice::Whole(spec_.info.vocab_size);
  spec_.info.num_layers = static_cast<int64_t>(spec_.layers.size());
  for (const DenseDecoderLayer& l : spec_.layers) {
    const AttentionOptions& o = l.attention_options;
    kv::LayerKvSpec kv_spec;
    kv_spec.kind = o.window > 0 ? kv::AttentionKind::kSlidingWindow : kv::AttentionKind::kFull;
    kv_spec.window = o.window > 0 ? o.window : 0;
    kv_spec.num_kv_heads = o.num_kv_heads;
    kv_spec.head_dim = o.head_dim;
    kv_specs_.push_back(kv_spec);
  }
}

WeightBytes DenseDecoder::weight_bytes() const {
  WeightBytes bytes;
  // A tied head is the embedding table, counted once (a later pipeline stage holds only the head).
  const bool head_is_table = spec_.tied_embeddings && !spec_.embed_tokens.empty();
  bytes.total = spec_.embed_tokens.bytes() + (head_is_table ? 0 : spec_.lm_head.bytes());
  int64_t layers = 0;
  bytes.repacked = spec_.embed_tokens.repacked_bytes() + (head_is_table ? 0 : spec_.lm_head.repacked_bytes());
  for (const DenseDecoderLayer& l : spec_.layers) {
    const AttentionWeights& a = l.attention;
    for (const Linear* w : {&a.q, &a.k, &a.v, &a.o}) {
      layers += w->bytes();
      bytes.repacked += w->repacked_bytes();
    }
    layers += l.mlp.bytes();
    bytes.repacked += l.mlp.repacked_bytes();
  }
  bytes.total += layers;
  bytes.per_token_decode = layers + spec_.lm_head.bytes();
  return bytes;
}

ModelSummary DenseDecoder::Summary() const {
  ModelSummary s;
  s.architecture = spec_.info.architecture;
  s.num_layers = static_cast<int64_t>(spec_.layers.size());
  for (const DenseDecoderLayer& l : spec_.layers) {
    s.layer_pattern += l.attention_options.window > 0 ? 'S' : 'F';
    if (l.attention_options.window > 0) s.sliding_window = l.attention_options.window;
  }
  const AttentionOptions& first = spec_.layers.front().attention_options;
  s.hidden_size = spec_.hidden_size;
  s.num_heads = first.num_heads;
  s.num_kv_heads = first.num_kv_heads;
  s.head_dim = first.head_dim;
  s.vocab_size = spec_.info.vocab_size;
  s.max_position_embeddings = spec_.info.max_position_embeddings;
  int64_t params = 0;
  for (const DenseDecoderLayer& l : spec_.layers) {
    const AttentionWeights& a = l.attention;
    for (const Linear* m : {&a.q, &a.k, &a.v, &a.o}) params += m->out_features() * m->in_features();
    params += l.mlp.parameters();
    params += l.attn_norm.size() + l.post_attn_norm.size() + l.ffn_norm.size() + l.post_ffn_norm.size() +
              a.q_norm_gain.size() + a.k_norm_gain.size();
  }
  params += spec_.final_norm.size();
  s.parameters_active = params;
  s.parameters_embedding = spec_.embed_tokens.out_features() * spec_.embed_tokens.in_features() *
                           (spec_.tied_embeddings ? 1 : 2);
  s.parameters_total = params + s.parameters_embedding;
  s.bytes = weight_bytes();
  return s;
}

int64_t DenseDecoder::WorkspaceBytes(const StepLimits& limits) const {
  const int64_t tokens = limits.max_tokens;
  int64_t block = 0;
  for (const DenseDecoderLayer& l : spec_.layers) {
    block = std::max({block, AttentionWorkspaceBytes(l.attention, l.attention_options, tokens),
                      MlpWorkspaceBytes(l.mlp, tokens)});
  }
  return DecoderWorkspaceBytes(tokens, limits.max_logit_rows, spec_.hidden_size, block, vocab_);
}

Status DenseDecoder::DrafterEmbedToken(int32_t token, float* out) const {
  if (token < 0 || token >= spec_.info.vocab_size) return InvalidArgument(fmt::format("token {} is outside the vocabulary", token));
  if (vocab_.sharded() || spec_.embed_tokens.empty()) {
    return Unimplemented("drafters that share the target's embedding need it whole: run without tensor or pipeline "
                         "parallelism");
  }
  return ember::EmbedToken(spec_.embed_tokens, {.scale = spec_.embed_scale}, token, spec_.hidden_size, out);
}

Status DenseDecoder::ApplyFinalNorm(const float* x, int64_t rows, float* out) const {
  kernels::RmsNormGain(x, rows, spec_.hidden_size, spec_.norm_eps, spec_.final_norm.data(), out);
  return Status::Ok();
}

Status DenseDecoder::Forward(const ForwardBatch& batch, KvStore& kv, ForwardOutput* out) {
  EMBER_RETURN_IF_ERROR(CheckForwardBatch(*this, batch, kv));
  const PipelineStage& stage = spec_.pipeline;
  if (stage.comm != nullptr && !batch.hidden_state_layers.empty()) {
    return Unimplemented("hidden states (DSpark) are not available under pipeline parallelism");
  }
  Workspace::Scope scope(workspace_);
  const int64_t h = spec_.hidden_size;
  const int64_t count = batch.num_tokens();
  float* residual = workspace_.Take<float>(count * h);
  if (stage.first()) {
    EMBER_RETURN_IF_ERROR(
        EmbedInputs(spec_.embed_tokens, {.scale = spec_.embed_scale}, vocab_, batch, h, comm_, residual));
  } else {
    ReceiveResidual(stage, residual, count * h);
  }
  const StepContext step(batch, kv, comm_, workspace_);
  HiddenStateTap tap(batch, h, out);
  for (size_t l = 0; l < spec_.layers.size(); ++l) {
    if (!stage.holds(static_cast<int64_t>(l))) continue;
    Layer(spec_.layers[l], static_cast<int64_t>(l), step, residual);
    tap.AfterLayer(static_cast<int64_t>(l), residual);
  }
  if (!stage.last()) {
    SendResidual(stage, residual, count * h);
    return Status::Ok();  // the sampling rank collects the logits with ReceiveLogits
  }
  HeadOptions head;
  head.norm_eps = spec_.norm_eps;
  head.final_gain = spec_.final_norm.data();
  head.logit_softcap = spec_.final_logit_softcap;
  RunHead(head, spec_.lm_head, vocab_, step, residual, out);
  return Status::Ok();
}

Status DenseDecoder::ReceiveLogits(int64_t rows, ForwardOutput* out) {
  if (!logits_arrive_later()) return InvalidArgument("ReceiveLogits on a rank no logits are sent to");
  ember::ReceiveLogits(spec_.pipeline, rows, spec_.info.vocab_size, out);
  return Status::Ok();
}

Status DenseDecoder::SendLogits(const ForwardOutput& out) {
  if (!sends_logits()) return InvalidArgument("SendLogits on a rank that does not send them");
  ember::SendLogits(spec_.pipeline, out);
  return Status::Ok();
}

void DenseDecoder::Layer(const DenseDecoderLayer& layer, int64_t index, const StepContext& step, float* residual) {
  const int64_t h = spec_.hidden_size;
  const int64_t count = step.num_tokens();
  const float eps = spec_.norm_eps;
  Workspace::Scope scope(step.workspace);
  float* x = step.workspace.Take<float>(count * h);
  float* out = step.workspace.Take<float>(count * h);
  kernels::RmsNormGain(residual, count, h, eps, layer.attn_norm.data(), x);
  RunAttention(layer.attention, layer.attention_options, index, x, step, out);
  if (!layer.post_attn_norm.empty()) kernels::RmsNormGain(out, count, h, eps, layer.post_attn_norm.data(), out);
  kernels::AddInPlace(residual, out, count * h);

  ScopedOp op("mlp", index);
  kernels::RmsNormGain(residual, count, h, eps, layer.ffn_norm.data(), x);
  RunMlp(layer.mlp, spec_.activation, x, count, step, out);
  if (!layer.post_ffn_norm.empty()) kernels::RmsNormGain(out, count, h, eps, layer.post_ffn_norm.data(), out);
  kernels::AddInPlace(residual, out, count * h);
}

}  // namespace ember
