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

// Fills info, embed_tokens, lm_head (tied when output.weight is absent), final_norm and
// keep_alive. hidden_size must be set.
Status LoadGgufEmbeddingsAndHead(const GgufWeights& weights, DenseDecoderSpec& spec);

// The attention projections of layer `l` (attn_q, attn_k, attn_v, attn_output).
Status LoadGgufAttention(const GgufWeights& weights, int64_t l, int64_t hidden, const AttentionOptions& options,
                         AttentionWeights& attention);

// The gated MLP of layer `l` (ffn_gate, ffn_up, ffn_down).
Status LoadGgufMlp(const GgufWeights& weights, int64_t l, int64_t hidden, int64_t intermediate,
                   DenseDecoderLayer& layer);

}  // namespace ember
