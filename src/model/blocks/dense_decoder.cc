#include "model/blocks/dense_decoder.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/op_trace.h"
#include "kernels/ops.h"
#include "model/blocks/decoder_ends.h"
#include "model/parallel_linear.h"

namespace ember {

DenseDecoder::DenseDecoder(DenseDecoderSpec spec)
    : spec_(std::move(spec)), comm_(exec::OrLocal(spec_.communicator)) {
  spec_.info.hidden_size = spec_.hidden_size;
  spec_.info.num_layers = static_cast<int64_t>(spec_.layers.size());
}

WeightBytes DenseDecoder::weight_bytes() const {
  WeightBytes bytes;
  bytes.total = spec_.embed_tokens.bytes() + (spec_.tied_embeddings ? 0 : spec_.lm_head.bytes());
  int64_t layers = 0;
  bytes.repacked = spec_.embed_tokens.repacked_bytes() + (spec_.tied_embeddings ? 0 : spec_.lm_head.repacked_bytes());
  for (const DenseDecoderLayer& l : spec_.layers) {
    const AttentionWeights& a = l.attention;
    for (const Linear* w : {&a.q, &a.k, &a.v, &a.o, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
      layers += w->bytes();
      bytes.repacked += w->repacked_bytes();
    }
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
    for (const Linear* m : {&a.q, &a.k, &a.v, &a.o, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
      params += m->out_features() * m->in_features();
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

std::vector<kv::LayerKvSpec> DenseDecoder::KvLayerSpecs() const {
  std::vector<kv::LayerKvSpec> specs;
  for (const DenseDecoderLayer& l : spec_.layers) {
    const AttentionOptions& o = l.attention_options;
    kv::LayerKvSpec spec;
    spec.kind = o.window > 0 ? kv::AttentionKind::kSlidingWindow : kv::AttentionKind::kFull;
    spec.window = o.window > 0 ? o.window : 0;
    spec.num_kv_heads = o.num_kv_heads;
    spec.head_dim = o.head_dim;
    specs.push_back(spec);
  }
  return specs;
}

Status DenseDecoder::Forward(const ForwardBatch& batch, KvStore& kv, ForwardOutput* out) {
  EMBER_RETURN_IF_ERROR(CheckForwardBatch(*this, batch, kv));
  const int64_t h = spec_.hidden_size;
  std::vector<float> residual(batch.num_tokens() * h);
  EMBER_RETURN_IF_ERROR(EmbedInputs(spec_.embed_tokens, {.scale = spec_.embed_scale}, batch, h, residual.data()));
  const AttentionStep step(batch, kv, comm_);
  HiddenStateTap tap(batch, h, out);
  for (size_t l = 0; l < spec_.layers.size(); ++l) {
    Layer(spec_.layers[l], static_cast<int64_t>(l), step, residual.data());
    tap.AfterLayer(static_cast<int64_t>(l), residual.data());
  }
  HeadOptions head;
  head.norm_eps = spec_.norm_eps;
  head.final_gain = spec_.final_norm.data();
  head.logit_softcap = spec_.final_logit_softcap;
  RunHead(head, spec_.lm_head, batch, h, residual.data(), out);
  return Status::Ok();
}

void DenseDecoder::Layer(const DenseDecoderLayer& layer, int64_t index, const AttentionStep& step,
                         float* residual) {
  const int64_t h = spec_.hidden_size;
  const int64_t count = step.batch.num_tokens();
  const float eps = spec_.norm_eps;
  std::vector<float> x(count * h), out(count * h);
  kernels::RmsNormGain(residual, count, h, eps, layer.attn_norm.data(), x.data());
  RunAttention(layer.attention, layer.attention_options, index, x.data(), step, out.data());
  if (!layer.post_attn_norm.empty()) kernels::RmsNormGain(out.data(), count, h, eps, layer.post_attn_norm.data(),
                                                         out.data());
  for (int64_t i = 0; i < count * h; ++i) residual[i] += out[i];

  ScopedOp op("mlp", index);
  kernels::RmsNormGain(residual, count, h, eps, layer.ffn_norm.data(), x.data());
  const int64_t inter = layer.ffn_gate.out_features();
  std::vector<float> gate(count * inter), up(count * inter);
  // gate and up column-parallel, down row-parallel: a rank holds a block of the intermediate width.
  ColumnParallelApply(layer.ffn_gate, x.data(), count, gate.data());
  ColumnParallelApply(layer.ffn_up, x.data(), count, up.data());
  if (spec_.activation == GatedActivation::kSilu) {
    kernels::SwiGlu(gate.data(), up.data(), count, inter, gate.data());
  } else {
    kernels::GeGluTanh(gate.data(), up.data(), count, inter, gate.data());
  }
  RowParallelApply(layer.ffn_down, gate.data(), count, out.data(), comm_);
  if (!layer.post_ffn_norm.empty()) kernels::RmsNormGain(out.data(), count, h, eps, layer.post_ffn_norm.data(),
                                                        out.data());
  for (int64_t i = 0; i < count * h; ++i) residual[i] += out[i];
}

}  // namespace ember
