// A random Gemma-3-shaped DenseDecoder for model tests that need a dense model whose weights
// they control (no file): f32 weights from a fixed seed.
#pragma once

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "model/blocks/dense_decoder.h"

namespace ember::test {

// A random Gemma-3-shaped decoder: sliding (window 5) and full layers, QK-norm gains, rotate-half
// RoPE, GeGLU, embedding scale, softcap; GQA 6 heads over 2 KV heads of head_dim 12.
class RandomDenseDecoder {
 public:
  RandomDenseDecoder() {
    constexpr int64_t kHidden = 48, kHeads = 6, kKvHeads = 2, kHeadDim = 12, kInter = 64, kVocab = 97;
    DenseDecoderSpec spec;
    spec.info.architecture = "random_gemma";
    spec.info.vocab_size = kVocab;
    spec.info.max_position_embeddings = 4096;
    spec.hidden_size = kHidden;
    spec.norm_eps = 1e-6f;
    spec.embed_scale = std::sqrt(static_cast<float>(kHidden));
    spec.final_logit_softcap = 30.0f;
    spec.activation = GatedActivation::kGeluTanh;
    spec.embed_tokens = Matrix(kVocab, kHidden);
    embed_tokens_ = spec.embed_tokens;
    spec.lm_head = spec.embed_tokens;
    spec.tied_embeddings = true;
    spec.final_norm = Gain(kHidden);
    std::vector<float> inv_freq(kHeadDim / 2);
    kernels::RopeInverseFrequencies(10000.0, kHeadDim, inv_freq.data());
    for (int l = 0; l < 4; ++l) {
      DenseDecoderLayer layer;
      layer.attn_norm = Gain(kHidden);
      layer.post_attn_norm = Gain(kHidden);
      layer.ffn_norm = Gain(kHidden);
      layer.post_ffn_norm = Gain(kHidden);
      AttentionOptions& o = layer.attention_options;
      o.num_heads = kHeads;
      o.num_kv_heads = kKvHeads;
      o.head_dim = kHeadDim;
      o.qk_norm = QkNorm::kGain;
      o.softmax_scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
      o.rope = RopeLayout::kRotateHalf;
      o.inv_freq = inv_freq;
      o.window = l % 2 == 0 ? 5 : -1;
      layer.attention.q = Matrix(kHeads * kHeadDim, kHidden);
      layer.attention.k = Matrix(kKvHeads * kHeadDim, kHidden);
      layer.attention.v = Matrix(kKvHeads * kHeadDim, kHidden);
      layer.attention.o = Matrix(kHidden, kHeads * kHeadDim);
      layer.attention.q_norm_gain = Gain(kHeadDim);
      layer.attention.k_norm_gain = Gain(kHeadDim);
      layer.mlp.gate = Matrix(kInter, kHidden);
      layer.mlp.up = Matrix(kInter, kHidden);
      layer.mlp.down = Matrix(kHidden, kInter);
      spec.layers.push_back(std::move(layer));
    }
    model_ = std::make_unique<DenseDecoder>(std::move(spec));
  }
  DenseDecoder& model() { return *model_; }
  const Linear& embed_tokens() const { return embed_tokens_; }
  float embed_scale() const { return std::sqrt(48.0f); }

 private:
  Linear Matrix(int64_t rows, int64_t cols) {
    std::normal_distribution<float> normal(0.0f, 0.3f);
    storage_.emplace_back(rows * cols);
    for (float& x : storage_.back()) x = normal(rng_);
    return Linear::Dense(TensorView{DType::kF32, Shape{rows, cols}, storage_.back().data()});
  }
  std::vector<float> Gain(int64_t n) {
    std::uniform_real_distribution<float> uniform(0.5f, 1.5f);
    std::vector<float> g(n);
    for (float& x : g) x = uniform(rng_);
    return g;
  }

  std::mt19937 rng_{7};
  std::vector<std::vector<float>> storage_;  // a list: the views point into its elements
  std::unique_ptr<DenseDecoder> model_;
  Linear embed_tokens_;
};

}  // namespace ember::test
