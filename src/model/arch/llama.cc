// The Llama family from GGUF (SmolLM2, Llama 2/3, ...): pre-norm blocks, RoPE on every layer in
// the interleaved layout the GGUF converter produces, SwiGLU MLP, optional tied output.
#include <fmt/format.h>

#include <cmath>

#include "kernels/ops.h"
#include "model/arch/gguf_common.h"

namespace ember {
namespace {

Expected<std::unique_ptr<CausalLM>> LoadLlamaGguf(const std::string& path, const LoadOptions& load) {
  EMBER_ASSIGN_OR_RETURN(GgufWeights w, OpenGgufModel(path, "llama"));
  DenseDecoderSpec spec;
  EMBER_ASSIGN_OR_RETURN(spec.hidden_size, w.Int("embedding_length"));
  EMBER_ASSIGN_OR_RETURN(const int64_t layers, w.Int("block_count"));
  EMBER_ASSIGN_OR_RETURN(const int64_t heads, w.Int("attention.head_count"));
  const int64_t kv_heads = w.IntOr("attention.head_count_kv", heads);
  EMBER_ASSIGN_OR_RETURN(const int64_t intermediate, w.Int("feed_forward_length"));
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0 || spec.hidden_size % heads != 0) {
    return InvalidArgument(fmt::format("{}: inconsistent head counts ({} heads, {} KV heads, hidden {})", path,
                                       heads, kv_heads, spec.hidden_size));
  }
  const int64_t head_dim = w.IntOr("attention.key_length", spec.hidden_size / heads);
  const int64_t rope_dims = w.IntOr("rope.dimension_count", head_dim);
  if (rope_dims != head_dim) {
    return Unimplemented(fmt::format("{}: partial rotary embeddings (rope.dimension_count {} < head_dim {}) are "
                                     "not supported yet", path, rope_dims, head_dim));
  }
  if (w.file().Find("llama.rope.scaling.type") != nullptr) {
    return Unimplemented(fmt::format("{}: RoPE scaling is not supported yet", path));
  }
  spec.norm_eps = static_cast<float>(w.FloatOr("attention.layer_norm_rms_epsilon", 1e-5));
  spec.activation = GatedActivation::kSilu;
  EMBER_RETURN_IF_ERROR(LoadGgufEmbeddingsAndHead(w, load, layers, spec));

  AttentionOptions options;
  const GgufLayerShape shape{spec.hidden_size, heads, kv_heads, head_dim, intermediate};
  EMBER_ASSIGN_OR_RETURN(const LayerSplits splits, SplitGgufLayer(shape, load, options));
  options.softmax_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  options.rope = RopeLayout::kInterleaved;
  options.inv_freq.resize(head_dim / 2);
  kernels::RopeInverseFrequencies(w.FloatOr("rope.freq_base", 10000.0), head_dim, options.inv_freq.data());

  spec.layers.resize(layers);
  for (int64_t l = 0; l < layers; ++l) {
    DenseDecoderLayer& layer = spec.layers[l];
    const std::string p = fmt::format("blk.{}.", l);
    layer.attention_options = options;
    if (!spec.pipeline.holds(l)) continue;  // another pipeline stage's layer
    EMBER_ASSIGN_OR_RETURN(layer.attn_norm, w.Vector(p + "attn_norm.weight", spec.hidden_size));
    EMBER_ASSIGN_OR_RETURN(layer.ffn_norm, w.Vector(p + "ffn_norm.weight", spec.hidden_size));
    EMBER_RETURN_IF_ERROR(LoadGgufAttention(w, l, shape, splits, layer.attention));
    EMBER_RETURN_IF_ERROR(LoadGgufMlp(w, l, shape, splits, layer));
  }
  // A tensor-parallel rank copied its column blocks out of pages it does not keep using.
  if (exec::OrLocal(load.communicator).world_size() > 1) w.file().DropResidentPages();
  return std::unique_ptr<CausalLM>(new DenseDecoder(std::move(spec)));
}

const bool kRegistered = RegisterArchitecture("gguf:llama", LoadLlamaGguf);

}  // namespace
}  // namespace ember
