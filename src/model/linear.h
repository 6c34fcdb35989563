// A weight matrix [out, in] that a layer multiplies activations by, whatever its storage:
// bf16/f32 (safetensors, GGUF F32/F16-free paths) through kernels::MatMul, a GGUF quantized
// type through quant::GgufMatMul, or a block-scaled NVFP4/MXFP4/FP8 matrix through
// quant::BlockScaledMatMul. Also the embedding-row lookup for the same storages.
//
// Each factory binds the storage's matmul and row reader once, so Apply is one indirect call
// with no switch; below it each matmul picks its kernel from its weight type's traits row
// (quant/gguf_type_kernels.h, quant/block_scaled.h) and the active ISA level (core/isa.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"
#include "core/tensor.h"
#include "quant/block_scaled.h"
#include "quant/gguf_matmul.h"

namespace ember {

class Linear {
 public:
  Linear() = default;
  // A bf16 or f32 [out, in] matrix. `owner`, if given, keeps the viewed bytes alive (a copy the
  // caller made, e.g. a tensor-parallel rank's block of columns); null when they live in a
  // mapping that outlives the model.
  static Linear Dense(const TensorView& weight, std::shared_ptr<const void> owner = nullptr);
  // A GGUF matrix (any type GgufMatMul supports; F32/F16/BF16 included). Q5_0 / Q4_K matrices
  // on an AVX-512 host also get a repacked copy (quant/gguf_packed.h), owned here. `owner` as for
  // Dense.
  static Linear Quantized(const quant::QuantMatrix& weight, std::shared_ptr<const void> owner = nullptr);
  // A block-scaled matrix (must pass ValidateBlockScaledMatrix); `owner` keeps its bytes alive.
  // MXFP4 / NVFP4 matrices get a repacked copy for the packed GEMM where the active variant has
  // one (quant/block_scaled_packed.h), owned here.
  static Linear BlockScaled(const quant::BlockScaledMatrix& weight, std::shared_ptr<const void> owner);

  bool empty() const { return out_features_ == 0; }
  int64_t out_features() const { return out_features_; }
  int64_t in_features() const { return in_features_; }
  int64_t bytes() const { return bytes_; }
  // Bytes of the load-time repacked copy (0 without one). The file's bytes stay mapped besides
  // it (clean page cache the kernel may drop, but resident after packing read them).
  int64_t repacked_bytes() const { return repacked_bytes_; }

  // y [m, out] = x [m, in] · W^T.
  void Apply(const float* x, int64_t m, float* y) const;
  // ys[i] = linears[i]->Apply(x, m), bit for bit, for matrices of the same input width (at most
  // quant::kMaxSharedMatMuls): GGUF matrices whose activation rows have one format, and FP4
  // block-scaled ones, quantize x once between them (a layer's q/k/v, its gate and up) instead
  // of once each.
  static void ApplyShared(std::span<const Linear* const> linears, const float* x, int64_t m,
                          std::span<float* const> ys);
  // Row `row` of the matrix as f32 (embedding lookup): out has in_features() floats.
  Status ReadRow(int64_t row, float* out) const;
  // A matrix of the given rows of this one, in that order, bit for bit (a copy it owns): a
  // drafter's lm_head over a draft vocabulary. Dense and GGUF matrices; block-scaled ones are
  // Unimplemented.
  Expected<Linear> GatherRows(std::span<const int32_t> rows) const;
  // This matrix quantized to GGUF Q8_0 (gguf-py's rounding, 32-weight blocks; a copy it owns), for
  // the integer dot products: a drafter's small matmuls run about 3x faster than through bf16
  // weights widened to f32. in_features must be a multiple of 32.
  Expected<Linear> QuantizedQ8_0() const;

 private:
  using ApplyFn = void (*)(const Linear& self, const float* x, int64_t m, float* y);
  using ReadRowFn = Status (*)(const Linear& self, int64_t row, float* out);
  static void ApplyDense(const Linear& self, const float* x, int64_t m, float* y);
  static void ApplyGguf(const Linear& self, const float* x, int64_t m, float* y);
  static void ApplyBlockScaled(const Linear& self, const float* x, int64_t m, float* y);
  static Status ReadDenseRow(const Linear& self, int64_t row, float* out);
  static Status ReadGgufRow(const Linear& self, int64_t row, float* out);
  static Status ReadBlockScaledRow(const Linear& self, int64_t row, float* out);

  // The dense pair for a default-constructed (empty) Linear, whose calls then fail its checks.
  ApplyFn apply_ = &ApplyDense;
  ReadRowFn read_row_ = &ReadDenseRow;
  TensorView dense_;
  quant::QuantMatrix quant_{};
  quant::BlockScaledMatrix block_{};
  std::shared_ptr<const void> owner_;
  std::shared_ptr<const uint8_t> packed_owner_;  // the block-scaled packed copy, if any
  std::shared_ptr<const void> own_bytes_;        // a copy this matrix views: GatherRows', QuantizedQ8_0's, a shard's
  int64_t out_features_ = 0;
  int64_t in_features_ = 0;
  int64_t bytes_ = 0;
  int64_t repacked_bytes_ = 0;
};

}  // namespace ember
