// Gemma 3 text from GGUF: sandwich norms (pre and post around attention and MLP), per-head QK
// RMSNorm with gains, RoPE in the rotate-half (NEOX) layout with a 10k base on sliding layers and
// the file's base on global layers, a 5:1 sliding/global pattern, GELU-tanh gated MLP,
// embeddings scaled by sqrt(hidden), tied output. The GGUF converter has already folded Gemma's
// "1 + weight" norm gains into the stored weights.
#include <fmt/format.h>

#include <cmath>

#include "kernels/ops.h"
#include "model/arch/gguf_common.h"

namespace ember {
namespace {

// llama.cpp's Gemma 3 defaults, which the GGUF does not always store.
constexpr int64_t kDefaultSlidingPattern = 6;   // every 6th layer is global
constexpr double kSlidingRopeBase = 10000.0;

Expected<std::unique_ptr<CausalLM>> LoadGemma3Gguf(const std::string& path, const LoadOptions& load) {
  EMBER_ASSIGN_OR_RETURN(GgufWeights w, OpenGgufModel(path, "gemma3"));
  DenseDecoderSpec spec;
  EMBER_ASSIGN_OR_RETURN(spec.hidden_size, w.Int("embedding_length"));
  EMBER_ASSIGN_OR_RETURN(const int64_t layers, w.Int("block_count"));
  EMBER_ASSIGN_OR_RETURN(const int64_t heads, w.Int("attention.head_count"));
  const int64_t kv_heads = w.IntOr("attention.head_count_kv", heads);
  EMBER_ASSIGN_OR_RETURN(const int64_t intermediate, w.Int("feed_forward_length"));
  const int64_t head_dim = w.IntOr("attention.key_length", spec.hidden_size / heads);
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0 || w.IntOr("attention.value_length", head_dim) != head_dim) {
    return InvalidArgument(fmt::format("{}: inconsistent attention shape", path));
  }
  if (w.file().Find("gemma3.rope.scaling.type") != nullptr) {
    return Unimplemented(fmt::format("{}: RoPE scaling (larger Gemma 3 models) is not supported yet", path));
  }
  const int64_t window = w.IntOr("attention.sliding_window", 512);
  const int64_t pattern = w.IntOr("attention.sliding_window_pattern", kDefaultSlidingPattern);
  spec.norm_eps = static_cast<float>(w.FloatOr("attention.layer_norm_rms_epsilon", 1e-6));
  spec.activation = GatedActivation::kGeluTanh;
  spec.embed_scale = std::sqrt(static_cast<float>(spec.hidden_size));
  spec.final_logit_softcap = static_cast<float>(w.FloatOr("final_logit_softcapping", 0.0));
  EMBER_RETURN_IF_ERROR(LoadGgufEmbeddingsAndHead(w, load, layers, spec));

  std::vector<float> global_freq(head_dim / 2), local_freq(head_dim / 2);
  kernels::RopeInverseFrequencies(w.FloatOr("rope.freq_base", 1000000.0), head_dim, global_freq.data());
  kernels::RopeInverseFrequencies(w.FloatOr("rope.freq_base_swa", kSlidingRopeBase), head_dim, local_freq.data());

  const GgufLayerShape shape{spec.hidden_size, heads, kv_heads, head_dim, intermediate};
  spec.layers.resize(layers);
  for (int64_t l = 0; l < layers; ++l) {
    DenseDecoderLayer& layer = spec.layers[l];
    const std::string p = fmt::format("blk.{}.", l);
    const bool sliding = (l + 1) % pattern != 0;
    AttentionOptions& o = layer.attention_options;
    EMBER_ASSIGN_OR_RETURN(const LayerSplits splits, SplitGgufLayer(shape, load, o));
    o.qk_norm = QkNorm::kGain;
    o.qk_norm_eps = spec.norm_eps;
    // Gemma 3 scales scores by query_pre_attn_scalar^-1/2, which equals head_dim for these sizes.
    o.softmax_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    o.rope = RopeLayout::kRotateHalf;
    o.inv_freq = sliding ? local_freq : global_freq;
    o.window = sliding ? window : -1;
    if (!spec.pipeline.holds(l)) continue;  // another pipeline stage's layer
    EMBER_ASSIGN_OR_RETURN(layer.attn_norm, w.Vector(p + "attn_norm.weight", spec.hidden_size));
    EMBER_ASSIGN_OR_RETURN(layer.post_attn_norm, w.Vector(p + "post_attention_norm.weight", spec.hidden_size));
    EMBER_ASSIGN_OR_RETURN(layer.ffn_norm, w.Vector(p + "ffn_norm.weight", spec.hidden_size));
    EMBER_ASSIGN_OR_RETURN(layer.post_ffn_norm, w.Vector(p + "post_ffw_norm.weight", spec.hidden_size));
    EMBER_ASSIGN_OR_RETURN(layer.attention.q_norm_gain, w.Vector(p + "attn_q_norm.weight", head_dim));
    EMBER_ASSIGN_OR_RETURN(layer.attention.k_norm_gain, w.Vector(p + "attn_k_norm.weight", head_dim));
    EMBER_RETURN_IF_ERROR(LoadGgufAttention(w, l, shape, splits, layer.attention));
    EMBER_RETURN_IF_ERROR(LoadGgufMlp(w, l, shape, splits, layer));
  }
  // A tensor-parallel rank copied its column blocks out of pages it does not keep using.
  if (exec::OrLocal(load.communicator).world_size() > 1) w.file().DropResidentPages();
  return std::unique_ptr<CausalLM>(new DenseDecoder(std::move(spec)));
}

const bool kRegistered = RegisterArchitecture("gguf:gemma3", LoadGemma3Gguf);

}  // namespace
}  // namespace ember
