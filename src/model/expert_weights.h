// ExpertWeights: the stacked routed-expert matrices of one MoE layer, [E, rows, cols] in HF
// orientation (rows = output features), in whichever storage the checkpoint or the load-time
// conversion gave them:
//
//   dense         a bf16/f32 TensorView [E, rows, cols] (kernels::MatMul per expert)
//   block-scaled  per expert one or more quant::BlockScaledMatrix row ranges (quant::BlockScaledMatMul):
//                 one for most layouts, two for NVFP4 gate_up with separate gate and up global
//                 scales, or two per-expert tensors (compressed-tensors' gate_proj / up_proj)
//
// Views point into mmapped checkpoint bytes or into buffers the ExpertWeights shares ownership of
// (load-time conversion); copies of an ExpertWeights share those buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "quant/block_scaled.h"

namespace ember {

// Whether block-scaled FP4 parts get the packed copies the GEMM reads. kNo for a stack that is
// only cut into a tensor-parallel rank's shard (which packs its own copy) and never multiplied whole.
enum class PackForGemm : bool { kNo, kYes };

class ExpertWeights {
 public:
  ExpertWeights() = default;
  // A bf16 or f32 [E, rows, cols] tensor; `owner` keeps its bytes alive when they are a copy
  // (a tensor-parallel rank's slice), nullptr when they live in a mapping that outlives the model.
  static ExpertWeights Dense(const TensorView& stacked, std::shared_ptr<const void> owner = nullptr);
  // parts[e] covers expert e's rows in order (their row counts sum to `rows`, each has `cols`
  // columns and passes quant::ValidateBlockScaledMatrix). `owner` keeps the viewed bytes alive
  // (nullptr when they live in a mapping that outlives the model).
  static ExpertWeights BlockScaled(int64_t rows, int64_t cols, std::vector<std::vector<quant::BlockScaledMatrix>> parts,
                                   std::shared_ptr<const void> owner, PackForGemm pack = PackForGemm::kYes);

  bool empty() const { return num_experts_ == 0; }
  int64_t num_experts() const { return num_experts_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  // The block-scaled format, or nullopt for dense storage.
  std::optional<quant::WeightFormat> format() const;
  // Bytes a pass over every expert reads (codes + scales, or the dense tensor).
  int64_t bytes() const { return bytes_; }
  // Bytes of the load-time packed copies of the FP4 parts (quant/block_scaled_packed.h; 0 without).
  int64_t repacked_bytes() const { return repacked_bytes_; }
  const std::vector<quant::BlockScaledMatrix>& parts(int64_t expert) const { return parts_[expert]; }
  // What keeps the viewed bytes alive (null for a mapping that outlives the model): a selection of
  // these experts shares it.
  const std::shared_ptr<const void>& owner() const { return owner_; }

  // y [n, rows] = x [n, cols] · W_expert^T. Row i of y depends only on row i of x.
  void Apply(int64_t expert, const float* x, int64_t n, float* y) const;

  // One expert's share of a grouped call: y [n, rows] = x [n, cols] · W_expert^T.
  struct Group {
    int64_t expert = 0;
    const float* x = nullptr;
    int64_t n = 0;
    float* y = nullptr;
  };
  // Every group's Apply in one thread-pool dispatch over (expert, output-row range) pairs balanced
  // by the bytes they stream (plus one inline or parallel activation-quantization loop for FP4),
  // instead of one or two dispatches per expert. Each y is bitwise what Apply writes.
  void ApplyGrouped(std::span<const Group> groups) const;
  // Row `row` of expert `expert` as f32 (cols values).
  void DequantizeRow(int64_t expert, int64_t row, float* out) const;

 private:
  int64_t num_experts_ = 0, rows_ = 0, cols_ = 0, bytes_ = 0, repacked_bytes_ = 0;
  TensorView dense_;
  std::vector<std::vector<quant::BlockScaledMatrix>> parts_;
  std::shared_ptr<const void> owner_;
  std::shared_ptr<const std::vector<std::shared_ptr<const uint8_t>>> packed_owner_;
};

}  // namespace ember
