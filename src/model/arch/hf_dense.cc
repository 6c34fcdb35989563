// Dense decoders from Hugging Face model directories (config.json + safetensors): Llama
// (SmolLM2, Llama 2/3), Qwen3 and Gemma 3 text, as transformers' LlamaForCausalLM,
// Qwen3ForCausalLM and Gemma3ForCausalLM compute them, on the same DenseDecoder the GGUF
// loaders build. What differs from the GGUF path, all of it the converters' doing:
//  - RoPE is rotate-half on the checkpoint's own q/k rows. llama.cpp's converter permutes Llama's
//    q_proj/k_proj rows into interleaved pairs (hence RopeLayout::kInterleaved in llama.cc);
//    HF checkpoints are unpermuted.
//  - Gemma's RMSNorm gains are stored zero-centred (the module multiplies by 1 + w); GGUF stores
//    1 + w. Gemma's q_norm / k_norm are the same module, so they get the +1 too.
//  - Gemma's scores scale by query_pre_attn_scalar^-1/2, its sliding layers come from
//    layer_types (or sliding_window_pattern) and rotate with rope_local_base_freq.
//  - Qwen3 normalises q and k per head with a plain (absolute) gain before RoPE.
// Matrices may be bf16, f16 or f32 (kept as stored, mapped); --quantization converts the decoder
// layers' linears at load (embeddings and lm_head stay as stored). Quantized checkpoints are
// read by ReadQuantizedLinear (model/quantized_linear.h).
#include <fmt/format.h>

#include <cmath>

#include "core/logging.h"
#include "formats/checkpoint.h"
#include "formats/ggml_type.h"
#include "model/arch/hf_dense.h"
#include "model/blocks/dense_decoder.h"
#include "model/hf_dense_config.h"
#include "model/quant_scheme.h"
#include "model/quantized_linear.h"
#include "model/quantized_weights.h"
#include "model/tensor_parallel.h"
#include "model/weight_source.h"

namespace ember {
namespace {

class HfDenseLoader {
 public:
  HfDenseLoader(const HfDenseConfig& c, WeightSource& w, const QuantScheme& scheme, const LoadOptions& options)
      : c_(c), w_(w), scheme_(scheme), options_(options) {}

  Expected<DenseDecoderSpec> Load();

 private:
  // A matrix kept as stored (bf16 / f32 / f16), for embeddings and lm_head; `split` is this
  // tensor-parallel rank's block of it (model/tensor_parallel.h).
  Expected<Linear> Stored(const std::string& name, int64_t rows, int64_t cols,
                          const MatrixSplit& split = MatrixSplit::Whole());
  // A decoder-layer linear `module` (".weight" appended): as the checkpoint quantized it, as
  // stored, or quantized now with options.quantization.
  Expected<Linear> LayerLinear(const std::string& module, int64_t rows, int64_t cols, const MatrixSplit& split);
  Expected<std::vector<float>> Norm(const std::string& name, int64_t n) {
    // Gemma3RMSNorm multiplies by (1 + w); Llama and Qwen3 by w.
    return RequireVectorF32(w_, name, n, c_.family == HfDenseFamily::kGemma3 ? 1.0f : 0.0f);
  }
  Expected<std::string> FindPrefix() const;

  const HfDenseConfig& c_;
  WeightSource& w_;
  const QuantScheme& scheme_;
  const LoadOptions& options_;
};

Expected<std::string> HfDenseLoader::FindPrefix() const {
  // ForCausalLM checkpoints, then Gemma3ForConditionalGeneration as transformers 5 and 4 save it.
  for (const char* prefix : {"model.", "model.language_model.", "language_model.model."}) {
    if (w_.Has(std::string(prefix) + "embed_tokens.weight")) return std::string(prefix);
  }
  return NotFound(fmt::format("{}: no embed_tokens.weight under model., model.language_model. or "
                              "language_model.model.; is this a {} checkpoint?", w_.Describe(), c_.model_type));
}

Expected<Linear> HfDenseLoader::Stored(const std::string& name, int64_t rows, int64_t cols, const MatrixSplit& split) {
  EMBER_ASSIGN_OR_RETURN(TensorView t, w_.Require(name, {DType::kBF16, DType::kF32, DType::kF16}, Shape{rows, cols}));
  if (split.whole()) return LinearFromTensor(t);
  Expected<Linear> linear = t.dtype == DType::kF16
                                ? SliceQuantized(quant::QuantMatrix{GgmlType::kF16, t.data, rows, cols, cols * 2}, split)
                                : SliceDense(t, split);
  if (split.kind == MatrixSplit::Kind::kColumns) w_.Release(t);  // the copy is all this rank keeps
  return linear;
}

Expected<Linear> HfDenseLoader::LayerLinear(const std::string& module, int64_t rows, int64_t cols,
                                            const MatrixSplit& split) {
  const std::string name = module + ".weight";
  if (scheme_.quantized() && !scheme_.Excludes(module)) {
    if (split.whole()) return ReadQuantizedLinear(w_, scheme_, module, rows, cols);
    EMBER_ASSIGN_OR_RETURN(OwnedBlockScaledMatrix whole, ReadQuantizedMatrix(w_, scheme_, module, rows, cols));
    EMBER_ASSIGN_OR_RETURN(OwnedBlockScaledMatrix shard, SliceBlockScaled(whole.matrix, split));
    return Linear::BlockScaled(shard.matrix, std::move(shard.owner));
  }
  if (!options_.quantization) return Stored(name, rows, cols, split);
  EMBER_ASSIGN_OR_RETURN(TensorView full, w_.Require(name, {DType::kBF16, DType::kF32}, Shape{rows, cols}));
  return QuantizeLinear(full, *options_.quantization, options_.mxfp4_rounding, split);
}

Expected<DenseDecoderSpec> HfDenseLoader::Load() {
  const bool gemma = c_.family == HfDenseFamily::kGemma3;
  const int64_t h = c_.hidden_size;
  const int64_t d = c_.head_dim;
  const int64_t q_width = c_.num_attention_heads * d;
  const int64_t kv_width = c_.num_key_value_heads * d;
  EMBER_ASSIGN_OR_RETURN(const std::string p, FindPrefix());

  DenseDecoderSpec spec;
  spec.communicator = options_.communicator;
  const TensorParallelRank tp = TensorParallelRank::Of(exec::OrLocal(options_.communicator));
  EMBER_ASSIGN_OR_RETURN(const LayerSplits splits,
                         SplitLayer(c_.num_attention_heads, c_.num_key_value_heads, d, c_.intermediate_size, tp));
  spec.vocab_shard = VocabShard(c_.vocab_size, tp);
  const MatrixSplit vocab_rows = MatrixSplit::Rows(spec.vocab_shard);
  spec.hidden_size = h;
  spec.norm_eps = static_cast<float>(c_.rms_norm_eps);
  spec.activation = gemma ? GatedActivation::kGeluTanh : GatedActivation::kSilu;
  spec.embed_scale = gemma ? std::sqrt(static_cast<float>(h)) : 1.0f;
  spec.final_logit_softcap = static_cast<float>(c_.final_logit_softcapping);
  // Only the first pipeline stage embeds and only the last runs the head.
  EMBER_ASSIGN_OR_RETURN(spec.pipeline, options_.pipeline.ForModel(c_.num_hidden_layers));
  const PipelineStage& stage = spec.pipeline;
  if (stage.first()) {
    EMBER_ASSIGN_OR_RETURN(spec.embed_tokens, Stored(p + "embed_tokens.weight", c_.vocab_size, h, vocab_rows));
  }
  // transformers ties lm_head to the embedding when tie_word_embeddings is set, whatever the
  // file holds; otherwise lm_head.weight must be there.
  std::string head = "lm_head.weight";
  if (!w_.Has(head) && w_.Has("language_model.lm_head.weight")) head = "language_model.lm_head.weight";
  spec.tied_embeddings = c_.tie_word_embeddings;
  if (!spec.tied_embeddings && !w_.Has(head)) {
    return NotFound(fmt::format("{}: tie_word_embeddings is false but there is no lm_head.weight; the checkpoint "
                                "is incomplete", w_.Describe()));
  }
  if (stage.last() && spec.tied_embeddings && stage.first()) {
    spec.lm_head = spec.embed_tokens;
  } else if (stage.last()) {
    EMBER_ASSIGN_OR_RETURN(spec.lm_head, Stored(spec.tied_embeddings ? p + "embed_tokens.weight" : head,
                                                c_.vocab_size, h, vocab_rows));
  }
  EMBER_ASSIGN_OR_RETURN(spec.final_norm, Norm(p + "norm.weight", h));
  spec.info.architecture = c_.model_type;
  spec.info.vocab_size = c_.vocab_size;
  spec.info.max_position_embeddings = c_.max_position_embeddings;
  spec.info.bos_token_id = c_.bos_token_id;
  spec.info.eos_token_ids = c_.eos_token_ids;

  const std::vector<float> global_freq = c_.rope.InverseFrequencies(d);
  const std::vector<float> local_freq = c_.local_rope.InverseFrequencies(d);
  spec.layers.resize(c_.num_hidden_layers);
  for (int64_t l = 0; l < c_.num_hidden_layers; ++l) {
    DenseDecoderLayer& layer = spec.layers[l];
    const std::string lp = fmt::format("{}layers.{}.", p, l);
    const bool sliding = c_.sliding[l];
    AttentionOptions& o = layer.attention_options;
    o.num_heads = splits.heads.q_heads.count;
    o.num_kv_heads = splits.heads.kv_heads.count;
    o.head_dim = d;
    o.rope = RopeLayout::kRotateHalf;
    o.inv_freq = sliding ? local_freq : global_freq;
    o.window = sliding ? c_.sliding_window : -1;
    o.softmax_scale = 1.0f / std::sqrt(static_cast<float>(gemma ? c_.query_pre_attn_scalar : d));
    if (!stage.holds(l)) continue;  // another pipeline stage's layer
    AttentionWeights& a = layer.attention;
    if (c_.family != HfDenseFamily::kLlama) {
      o.qk_norm = QkNorm::kGain;
      o.qk_norm_eps = spec.norm_eps;
      EMBER_ASSIGN_OR_RETURN(a.q_norm_gain, Norm(lp + "self_attn.q_norm.weight", d));
      EMBER_ASSIGN_OR_RETURN(a.k_norm_gain, Norm(lp + "self_attn.k_norm.weight", d));
    }
    EMBER_ASSIGN_OR_RETURN(a.q, LayerLinear(lp + "self_attn.q_proj", q_width, h, splits.q));
    EMBER_ASSIGN_OR_RETURN(a.k, LayerLinear(lp + "self_attn.k_proj", kv_width, h, splits.kv));
    EMBER_ASSIGN_OR_RETURN(a.v, LayerLinear(lp + "self_attn.v_proj", kv_width, h, splits.kv));
    EMBER_ASSIGN_OR_RETURN(a.o, LayerLinear(lp + "self_attn.o_proj", h, q_width, splits.o));
    EMBER_ASSIGN_OR_RETURN(layer.mlp.gate, LayerLinear(lp + "mlp.gate_proj", c_.intermediate_size, h, splits.ffn_in));
    EMBER_ASSIGN_OR_RETURN(layer.mlp.up, LayerLinear(lp + "mlp.up_proj", c_.intermediate_size, h, splits.ffn_in));
    EMBER_ASSIGN_OR_RETURN(layer.mlp.down, LayerLinear(lp + "mlp.down_proj", h, c_.intermediate_size, splits.ffn_out));
    EMBER_ASSIGN_OR_RETURN(layer.attn_norm, Norm(lp + "input_layernorm.weight", h));
    if (gemma) {
      // Sandwich norms: post_attention_layernorm normalises the attention output, the MLP has
      // its own pre and post norms.
      EMBER_ASSIGN_OR_RETURN(layer.post_attn_norm, Norm(lp + "post_attention_layernorm.weight", h));
      EMBER_ASSIGN_OR_RETURN(layer.ffn_norm, Norm(lp + "pre_feedforward_layernorm.weight", h));
      EMBER_ASSIGN_OR_RETURN(layer.post_ffn_norm, Norm(lp + "post_feedforward_layernorm.weight", h));
    } else {
      // Llama / Qwen3: post_attention_layernorm is the MLP's pre-norm.
      EMBER_ASSIGN_OR_RETURN(layer.ffn_norm, Norm(lp + "post_attention_layernorm.weight", h));
    }
  }
  return spec;
}

}  // namespace

Expected<Linear> LinearFromTensor(const TensorView& t) {
  if (t.shape.rank() != 2) return InvalidArgument(fmt::format("a matrix must be 2-D, got {}", t.shape.ToString()));
  if (t.dtype == DType::kBF16 || t.dtype == DType::kF32) return Linear::Dense(t);
  if (t.dtype == DType::kF16) {
    // f16 runs through the GGUF F16 matmul on the mapped bytes (no widened copy).
    quant::QuantMatrix m{GgmlType::kF16, t.data, t.shape[0], t.shape[1], t.shape[1] * 2};
    return Linear::Quantized(m);
  }
  return InvalidArgument(fmt::format("a {} matrix cannot be used as a dense weight", DTypeName(t.dtype)));
}

Expected<std::unique_ptr<CausalLM>> LoadHfDenseDirectory(const std::string& dir, const LoadOptions& options) {
  EMBER_ASSIGN_OR_RETURN(HfDenseConfig config, HfDenseConfig::FromDirectory(dir));
  EMBER_ASSIGN_OR_RETURN(QuantScheme scheme, ReadQuantScheme(dir));
  if (options.quantization && scheme.quantized()) {
    return InvalidArgument(fmt::format("--quantization {} converts bf16/f32 checkpoints, but {} is already "
                                       "quantized ({})", quant::WeightFormatName(*options.quantization), dir,
                                       scheme.Describe()));
  }
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::OpenDirectory(dir));
  std::shared_ptr<const Checkpoint> shared(std::move(checkpoint));
  std::shared_ptr<WeightSource> source = MakeCheckpointWeightSource(shared, fmt::format("checkpoint {}", dir));
  if (scheme.quantized()) EMBER_LOG_INFO("{}: linears stored as {}", dir, scheme.Describe());
  HfDenseLoader loader(config, *source, scheme, options);
  EMBER_ASSIGN_OR_RETURN(DenseDecoderSpec spec, loader.Load());
  spec.keep_alive = shared;
  // A tensor-parallel rank copied its column blocks out of pages it does not keep using.
  if (exec::OrLocal(options.communicator).world_size() > 1) shared->DropResidentPages();
  const std::vector<std::string> unused = source->UnusedTensorNames();
  if (!unused.empty()) {
    EMBER_LOG_INFO("{}: {} tensors not used by the text decoder: {}", dir, unused.size(),
                   SummarizeTensorNames(unused));
  }
  return std::unique_ptr<CausalLM>(new DenseDecoder(std::move(spec)));
}

namespace {

const bool kRegistered = RegisterArchitecture("llama", LoadHfDenseDirectory) &&
                         RegisterArchitecture("qwen3", LoadHfDenseDirectory) &&
                         RegisterArchitecture("gemma3_text", LoadHfDenseDirectory) &&
                         RegisterArchitecture("gemma3", LoadHfDenseDirectory);

}  // namespace
}  // namespace ember
