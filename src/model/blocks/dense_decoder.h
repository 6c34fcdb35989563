// A dense (non-MoE) decoder-only transformer assembled from shared blocks: the Llama family and
// Gemma 3 are both instances, differing only in the options an architecture file fills in
// (norm placement, QK norms, RoPE layout and bases, sliding windows, activation, embedding scale).
#pragma once

#include <memory>
#include <vector>

#include "exec/communicator.h"
#include "model/blocks/attention_block.h"
#include "model/blocks/decoder_ends.h"
#include "model/blocks/mlp_block.h"
#include "model/causal_lm.h"
#include "model/linear.h"

namespace ember {

struct DenseDecoderLayer {
  std::vector<float> attn_norm;       // pre-attention RMSNorm gain
  std::vector<float> post_attn_norm;  // optional (Gemma): RMSNorm of the attention output
  std::vector<float> ffn_norm;        // pre-MLP RMSNorm gain
  std::vector<float> post_ffn_norm;   // optional (Gemma): RMSNorm of the MLP output
  AttentionWeights attention;
  AttentionOptions attention_options;
  MlpWeights mlp;
};

struct DenseDecoderSpec {
  ModelInfo info;
  int64_t hidden_size = 0;
  float norm_eps = 1e-5f;
  float embed_scale = 1.0f;          // Gemma multiplies embeddings by sqrt(hidden)
  float final_logit_softcap = 0.0f;  // 0 = none
  GatedActivation activation = GatedActivation::kSilu;
  Linear embed_tokens;               // [vocab, hidden], or this rank's block of the vocabulary
  Linear lm_head;                    // [vocab, hidden]; may alias embed_tokens (tied)
  ShardRange vocab_shard;            // the block embed_tokens and lm_head hold; count 0: all of it
  bool tied_embeddings = false;
  std::vector<float> final_norm;
  std::vector<DenseDecoderLayer> layers;
  std::shared_ptr<const void> keep_alive;  // the mapped file the weights point into
  // The tensor-parallel group (must outlive the model); nullptr: the process-wide
  // exec::LocalCommunicator. Layers' attention options and linears are then this rank's shard
  // (model/tensor_parallel.h).
  exec::Communicator* communicator = nullptr;
  // This rank's pipeline stage: `layers` outside it hold only their attention options (for the
  // KV layout, which spans every layer), and only the first stage holds embed_tokens, only the
  // last lm_head and final_norm.
  PipelineStage pipeline;
};

class DenseDecoder : public CausalLM {
 public:
  explicit DenseDecoder(DenseDecoderSpec spec);

  const ModelInfo& info() const override { return spec_.info; }
  WeightBytes weight_bytes() const override;
  ModelSummary Summary() const override;
  const std::vector<kv::LayerKvSpec>& KvLayerSpecs() const override { return kv_specs_; }
  kv::KvDtype DefaultKvDtype() const override { return kv::KvDtype::kF16; }
  Status DrafterEmbedToken(int32_t token, float* out) const override;
  const Linear* lm_head() const override {
    return vocab_.sharded() || spec_.lm_head.empty() ? nullptr : &spec_.lm_head;
  }
  Status ApplyFinalNorm(const float* x, int64_t rows, float* out) const override;
  Status Forward(const ForwardBatch& batch, KvStore& kv, ForwardOutput* out) override;
  int pipeline_stages() const override { return spec_.pipeline.num_stages; }
  bool logits_arrive_later() const override { return spec_.pipeline.logits_from >= 0; }
  bool sends_logits() const override { return spec_.pipeline.logits_to >= 0; }
  Status ReceiveLogits(int64_t rows, ForwardOutput* out) override;
  Status SendLogits(const ForwardOutput& out) override;
  int64_t WorkspaceBytes(const StepLimits& limits) const override;

 private:
  void Layer(const DenseDecoderLayer& layer, int64_t index, const StepContext& step, float* residual);

  DenseDecoderSpec spec_;
  exec::Communicator& comm_;
  VocabSlice vocab_;
  std::vector<kv::LayerKvSpec> kv_specs_;  // one per layer, from the attention options
};

}  // namespace ember
