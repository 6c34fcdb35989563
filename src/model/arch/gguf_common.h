// Pieces every GGUF architecture loader shares: opening the file, the model info, the embedding
// and (possibly tied) output matrices.
#pragma once

#include <memory>
#include <string>

#include "model/blocks/dense_decoder.h"
#include "model/gguf_weights.h"

namespace ember {

// Opens `path` and checks general.architecture == `expected_arch`.
Expected<GgufWeights> OpenGgufModel(const std::string& path, const std::string& expected_arch);

// Fills info, embed_tokens, lm_head (tied when output.weight is absent; both this rank's block
// of the vocabulary under tensor parallelism), vocab_shard, final_norm, keep_alive and
// communicator (`options.communicator`). hidden_size must be set.
// spec.pipeline gets options.pipeline's layers for `num_layers` layers.
Status LoadGgufEmbeddingsAndHead(const GgufWeights& weights, const LoadOptions& options, int64_t num_layers,
                                 DenseDecoderSpec& spec);

// A layer's attention shape and this rank's share of it: `options` gets the rank's head counts,
// `splits` how to cut each matrix (model/tensor_parallel.h).
struct GgufLayerShape {
  int64_t hidden = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0, intermediate = 0;
};
Expected<LayerSplits> SplitGgufLayer(const GgufLayerShape& shape, const LoadOptions& options,
                                     AttentionOptions& attention);

// The attention projections of layer `l` (attn_q, attn_k, attn_v, attn_output), this rank's shard.
Status LoadGgufAttention(const GgufWeights& weights, int64_t l, const GgufLayerShape& shape, const LayerSplits& splits,
                         AttentionWeights& attention);

// The gated MLP of layer `l` (ffn_gate, ffn_up, ffn_down), this rank's shard.
Status LoadGgufMlp(const GgufWeights& weights, int64_t l, const GgufLayerShape& shape, const LayerSplits& splits,
                   DenseDecoderLayer& layer);

}  // namespace ember
