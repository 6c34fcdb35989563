// Muse Spark text decoder (reference/muse_spark.md §1.3; transformers' MuseSparkTextModel plus
// the lm_head, output multiplier and tanh softcap of MuseSparkForConditionalGeneration).
//
// The f32 path: weights stay as stored (bf16 or f32, read through the matmul kernels; routed
// experts, and with --quantize-dense the layer linears, may be NVFP4 / MXFP4 / FP8 block-scaled,
// stored so or quantized while loading: model/quantized_weights.h) and every
// activation, the residual stream and the softmax are f32; the KV cache is f32, bf16 (default),
// f16 or fp8 as the KvStore holds it. On bf16-representable
// weights this is the reference implementation's float32 computation up to summation order.
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"
#include "exec/communicator.h"
#include "model/blocks/attention_block.h"
#include "model/blocks/decoder_ends.h"
#include "model/blocks/mlp_block.h"
#include "model/blocks/moe_block.h"
#include "model/causal_lm.h"
#include "model/expert_weights.h"
#include "model/linear.h"
#include "model/muse_spark_config.h"
#include "model/quant_scheme.h"
#include "model/tensor_parallel.h"
#include "model/weight_source.h"

namespace ember {

struct MuseSparkLayer {
  // Gains are stored ready to multiply: 1 + gamma for zero-centred norms.
  std::vector<float> input_gain, pre_ffn_gain, post_ffn_gain;
  // Norm-preserving residual gates: s = alpha * s + beta * branch, per channel.
  std::vector<float> attn_alpha, attn_beta, ffn_alpha, ffn_beta;
  AttentionWeights attention;  // q, k, v, o and the sigmoid output gate
  AttentionOptions attention_options;  // window and RoPE of this layer
  MoeWeights moe;  // sparse (latent MoE) layers
  MoeOptions moe_options;  // their routing and norms, and under expert parallelism this layer's placement
  MlpWeights mlp;  // dense layers (SwiGLU)
};

class MuseSparkModel : public CausalLM {
 public:
  // Reads every tensor the config implies from `weights` (which must outlive the model),
  // checking dtypes and shapes. Routed experts are read as `scheme` stores them
  // (model/quantized_weights.h), or quantized while loading when options.quantization is set
  // (the checkpoint must then be unquantized).
  static Expected<std::unique_ptr<MuseSparkModel>> Create(const MuseSparkConfig& config,
                                                          std::shared_ptr<WeightSource> weights,
                                                          const QuantScheme& scheme = {},
                                                          const LoadOptions& options = {});

  const ModelInfo& info() const override { return info_; }
  WeightBytes weight_bytes() const override { return weight_bytes_; }
  ModelSummary Summary() const override;
  const std::vector<kv::LayerKvSpec>& KvLayerSpecs() const override { return kv_specs_; }
  kv::KvDtype DefaultKvDtype() const override { return kv::KvDtype::kBF16; }
  Status DrafterEmbedToken(int32_t token, float* out) const override;
  const Linear* lm_head() const override { return vocab_.sharded() || lm_head_.empty() ? nullptr : &lm_head_; }
  Status ApplyFinalNorm(const float* x, int64_t rows, float* out) const override;
  Status Forward(const ForwardBatch& batch, KvStore& kv, ForwardOutput* out) override;
  Status ForwardWithoutTokens(ForwardOutput* out) override;
  int pipeline_stages() const override { return options_.pipeline.num_stages; }
  bool logits_arrive_later() const override { return options_.pipeline.logits_from >= 0; }
  bool sends_logits() const override { return options_.pipeline.logits_to >= 0; }
  Status ReceiveLogits(int64_t rows, ForwardOutput* out) override;
  Status SendLogits(const ForwardOutput& out) override;
  int64_t WorkspaceBytes(const StepLimits& limits) const override;
  const MuseSparkConfig& config() const { return config_; }

 private:
  MuseSparkModel(const MuseSparkConfig& config, std::shared_ptr<WeightSource> weights, const QuantScheme& scheme,
                 const LoadOptions& options, const LayerSplits& splits, const ShardRange& expert_columns,
                 bool expert_parallel);
  Status LoadWeights();
  Status LoadLayer(int64_t index, MuseSparkLayer& layer);
  // A decoder-layer linear (this tensor-parallel rank's `split` of it), quantized when
  // options_.quantize_dense asks for it.
  Expected<Linear> LoadLinear(const std::string& name, int64_t rows, int64_t cols, const MatrixSplit& split);
  void ReportConversion();
  // One stacked expert tensor as stored, or converted per options_.quantization, holding the
  // experts `held` (ascending; all of them without expert parallelism); `split` is this rank's
  // block of each expert's FFN features (rows of gate_up per half, columns of down).
  Expected<ExpertWeights> LoadExperts(const std::string& module, const char* param, int64_t rows, int64_t cols,
                                      int64_t halves, const MatrixSplit& split, std::span<const int32_t> held);
  // Under expert parallelism, the rank holding each expert of `layer` (--expert-placement, or
  // contiguous blocks of E / ranks); empty otherwise.
  std::vector<int32_t> ExpertOwners(int64_t layer) const;
  void AttentionBlock(const MuseSparkLayer& layer, int64_t index, const StepContext& step, float* residual);
  // `expert_tokens`: the layer's row of ForwardOutput::expert_load (sparse layers), else null.
  void FeedForwardBlock(const MuseSparkLayer& layer, const StepContext& step, float* residual,
                        int64_t* expert_tokens);

  MuseSparkConfig config_;
  std::shared_ptr<WeightSource> weights_;
  QuantScheme scheme_;
  LoadOptions options_;
  exec::Communicator& comm_;  // options_.communicator, or the process-wide LocalCommunicator
  // The MoE layers' group: options_.expert_communicator under DEP, else comm_.
  exec::Communicator& moe_comm_;
  MoeOptions moe_options_;    // the sparse layers' routing and norms, from the config (per layer: MuseSparkLayer)
  // Tensor parallelism (model/tensor_parallel.h): this rank's heads and dense-MLP block, its
  // block of every expert's FFN features, and its block of the vocabulary. Everything in one process.
  LayerSplits splits_;
  ShardRange expert_columns_;
  // Expert parallelism: this rank holds whole routed experts, E / ranks of every MoE layer.
  bool expert_parallel_ = false;
  VocabSlice vocab_;
  int64_t converted_ = 0;  // expert tensors converted so far (progress)
  ModelInfo info_;
  WeightBytes weight_bytes_;
  Linear embed_tokens_;  // [V, H]
  Linear lm_head_;       // [V, H]
  std::vector<float> final_gain_;
  std::vector<MuseSparkLayer> layers_;
  std::vector<kv::LayerKvSpec> kv_specs_;  // one per layer, from the config
  // The sparse layers this rank's stage runs, ascending: the rows of ForwardOutput::expert_load.
  std::vector<int32_t> counted_layers_;
};

}  // namespace ember
