#include "spec/dspark/dspark_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/dtypes.h"
#include "core/logging.h"
#include "formats/checkpoint.h"
#include "model/weight_source.h"

namespace ember::spec::dspark {
namespace {

// Drafter weights are bf16 or f32 (DeepSpec trains in bf16; fixtures are f32).
Expected<Linear> RequireMatrix(WeightSource& source, const std::string& name, int64_t rows, int64_t cols) {
  EMBER_ASSIGN_OR_RETURN(TensorView t, source.Require(name, {DType::kBF16, DType::kF32}, Shape{rows, cols}));
  return Linear::Dense(t);
}

// Any-shaped bf16/f32 tensor of `shape` as f32 values.
Expected<std::vector<float>> RequireF32(WeightSource& source, const std::string& name, const Shape& shape) {
  EMBER_ASSIGN_OR_RETURN(TensorView t, source.Require(name, {DType::kBF16, DType::kF32}, shape));
  std::vector<float> out(t.NumElements());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = t.dtype == DType::kF32 ? t.As<float>()[i] : BF16ToF32(t.As<uint16_t>()[i]);
  }
  return out;
}

Status BindLayer(const DSparkConfig& c, WeightSource& source, int64_t index, DSparkLayerWeights& layer) {
  const std::string p = fmt::format("layers.{}.", index);
  const int64_t h = c.hidden_size;
  EMBER_ASSIGN_OR_RETURN(layer.input_norm, RequireVectorF32(source, p + "input_layernorm.weight", h));
  EMBER_ASSIGN_OR_RETURN(layer.post_attention_norm, RequireVectorF32(source, p + "post_attention_layernorm.weight", h));
  EMBER_ASSIGN_OR_RETURN(layer.q_norm, RequireVectorF32(source, p + "self_attn.q_norm.weight", c.head_dim));
  EMBER_ASSIGN_OR_RETURN(layer.k_norm, RequireVectorF32(source, p + "self_attn.k_norm.weight", c.head_dim));
  EMBER_ASSIGN_OR_RETURN(layer.q, RequireMatrix(source, p + "self_attn.q_proj.weight", c.q_width(), h));
  EMBER_ASSIGN_OR_RETURN(layer.k, RequireMatrix(source, p + "self_attn.k_proj.weight", c.kv_width(), h));
  EMBER_ASSIGN_OR_RETURN(layer.v, RequireMatrix(source, p + "self_attn.v_proj.weight", c.kv_width(), h));
  EMBER_ASSIGN_OR_RETURN(layer.o, RequireMatrix(source, p + "self_attn.o_proj.weight", h, c.q_width()));
  EMBER_ASSIGN_OR_RETURN(layer.gate, RequireMatrix(source, p + "mlp.gate_proj.weight", c.intermediate_size, h));
  EMBER_ASSIGN_OR_RETURN(layer.up, RequireMatrix(source, p + "mlp.up_proj.weight", c.intermediate_size, h));
  EMBER_ASSIGN_OR_RETURN(layer.down, RequireMatrix(source, p + "mlp.down_proj.weight", h, c.intermediate_size));
  return Status::Ok();
}

// Tensors a DSpark checkpoint may carry that inference does not read: mask_embedding is vLLM's
// unused placeholder ("DSpark masks via the vocab row"). (t2d / d2t map a pruned vocabulary, which
// the config already refuses through draft_vocab_size.)
bool IgnorableTensor(const std::string& name) { return name == "mask_embedding"; }

}  // namespace

Expected<DSparkWeights> BindDSparkWeights(const DSparkConfig& c, WeightSource& source) {
  DSparkWeights w;
  const int64_t h = c.hidden_size;
  const int64_t taps = static_cast<int64_t>(c.target_layer_ids.size());
  EMBER_ASSIGN_OR_RETURN(w.fc, RequireMatrix(source, "fc.weight", h, taps * c.target_hidden_size));
  EMBER_ASSIGN_OR_RETURN(w.hidden_norm, RequireVectorF32(source, "hidden_norm.weight", h));
  EMBER_ASSIGN_OR_RETURN(w.final_norm, RequireVectorF32(source, "norm.weight", h));
  w.layers.resize(c.num_layers);
  for (int64_t l = 0; l < c.num_layers; ++l) EMBER_RETURN_IF_ERROR(BindLayer(c, source, l, w.layers[l]));
  const int64_t r = c.markov_rank;
  if (c.markov_head_type != MarkovHeadType::kNone) {
    EMBER_ASSIGN_OR_RETURN(w.markov_w1, RequireMatrix(source, "markov_head.markov_w1.weight", c.vocab_size, r));
    EMBER_ASSIGN_OR_RETURN(w.markov_w2, RequireMatrix(source, "markov_head.markov_w2.weight", c.vocab_size, r));
  }
  if (c.markov_head_type == MarkovHeadType::kGated) {
    EMBER_ASSIGN_OR_RETURN(w.markov_gate, RequireMatrix(source, "markov_head.gate_proj.weight", r, h + r));
    EMBER_ASSIGN_OR_RETURN(w.markov_gate_bias, RequireF32(source, "markov_head.gate_proj.bias", Shape{r}));
  }
  if (c.enable_confidence_head) {
    const int64_t in = h + (c.confidence_head_with_markov ? r : 0);
    EMBER_ASSIGN_OR_RETURN(w.confidence_weight, RequireF32(source, "confidence_head.proj.weight", Shape{1, in}));
    EMBER_ASSIGN_OR_RETURN(std::vector<float> bias, RequireF32(source, "confidence_head.proj.bias", Shape{1}));
    w.confidence_bias = bias[0];
  }
  if (source.Has("embed_tokens.weight")) {
    EMBER_ASSIGN_OR_RETURN(w.embed_tokens, RequireMatrix(source, "embed_tokens.weight", c.vocab_size, h));
  }
  if (source.Has("lm_head.weight")) {
    EMBER_ASSIGN_OR_RETURN(w.lm_head, RequireMatrix(source, "lm_head.weight", c.vocab_size, h));
  }
  std::vector<std::string> unused;
  for (const std::string& name : source.UnusedTensorNames()) {
    if (!IgnorableTensor(name)) {
      unused.push_back(name);
    } else {
      EMBER_LOG_INFO("DSpark drafter {}: ignoring {} (not used by inference)", source.Describe(), name);
    }
  }
  if (!unused.empty()) {
    // A tensor nobody reads means the checkpoint has a part this drafter would silently skip
    // (another head type, biases): refuse rather than draft without it.
    const std::string names = unused.size() <= 8 ? fmt::format("{}", fmt::join(unused, ", ")) : SummarizeTensorNames(unused);
    return InvalidArgument(fmt::format("DSpark drafter {}: tensors the config does not use: {} (check "
                                       "markov_head_type, enable_confidence_head and attention_bias)",
                                       source.Describe(), names));
  }
  return w;
}

Expected<DSparkWeights> LoadDSparkWeights(const std::string& dir, const DSparkConfig& config) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> opened, Checkpoint::OpenDirectory(dir));
  std::shared_ptr<const Checkpoint> checkpoint(std::move(opened));
  std::unique_ptr<WeightSource> source = MakeCheckpointWeightSource(checkpoint, fmt::format("checkpoint {}", dir));
  EMBER_ASSIGN_OR_RETURN(DSparkWeights w, BindDSparkWeights(config, *source));
  w.keep_alive = checkpoint;
  return w;
}

}  // namespace ember::spec::dspark
