// A weight matrix [out, in] that a layer multiplies activations by, whatever its storage:
// bf16/f32 (safetensors, GGUF F32/F16-free paths) through kernels::MatMul, or a GGUF quantized
// type through quant::GgufMatMul. Also the embedding-row lookup for the same storages.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/tensor.h"
#include "quant/gguf_matmul.h"

namespace ember {

class Linear {
 public:
  Linear() = default;
  // A bf16 or f32 [out, in] matrix.
  static Linear Dense(const TensorView& weight);
  // A GGUF matrix (any type GgufMatMul supports; F32/F16/BF16 included).
  static Linear Quantized(const quant::QuantMatrix& weight);

  bool empty() const { return out_features_ == 0; }
  int64_t out_features() const { return out_features_; }
  int64_t in_features() const { return in_features_; }
  int64_t bytes() const { return bytes_; }

  // y [m, out] = x [m, in] · W^T.
  void Apply(const float* x, int64_t m, float* y) const;
  // Row `row` of the matrix as f32 (embedding lookup): out has in_features() floats.
  Status ReadRow(int64_t row, float* out) const;

 private:
  bool quantized_ = false;
  TensorView dense_;
  quant::QuantMatrix quant_{};
  int64_t out_features_ = 0;
  int64_t in_features_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace ember
