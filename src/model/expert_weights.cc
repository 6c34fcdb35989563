#include "model/expert_weights.h"

#include <algorithm>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "quant/block_scaled_packed.h"
#include "quant/grouped_block_scaled_matmul.h"

namespace ember {

ExpertWeights ExpertWeights::Dense(const TensorView& stacked, std::shared_ptr<const void> owner) {
  EMBER_CHECK(stacked.shape.rank() == 3, "ExpertWeights::Dense needs [E, rows, cols], got {}",
              stacked.shape.ToString());
  EMBER_CHECK(stacked.dtype == DType::kBF16 || stacked.dtype == DType::kF32, "ExpertWeights::Dense: dtype {}",
              DTypeName(stacked.dtype));
  ExpertWeights w;
  w.dense_ = stacked;
  w.num_experts_ = stacked.shape[0];
  w.rows_ = stacked.shape[1];
  w.cols_ = stacked.shape[2];
  w.bytes_ = stacked.NumBytes();
  w.owner_ = std::move(owner);
  return w;
}

ExpertWeights ExpertWeights::BlockScaled(int64_t rows, int64_t cols,
                                         std::vector<std::vector<quant::BlockScaledMatrix>> parts,
                                         std::shared_ptr<const void> owner, PackForGemm pack) {
  ExpertWeights w;
  w.num_experts_ = static_cast<int64_t>(parts.size());
  w.rows_ = rows;
  w.cols_ = cols;
  for (const auto& expert : parts) {
    EMBER_CHECK(!expert.empty(), "an expert without matrices");
    int64_t covered = 0;
    for (const quant::BlockScaledMatrix& m : expert) {
      EMBER_CHECK(m.cols == cols && m.format == expert.front().format, "expert part [{}, {}] in a [{}, {}] stack",
                  m.rows, m.cols, rows, cols);
      EMBER_CHECK(quant::ValidateBlockScaledMatrix(m).ok(), "{}", quant::ValidateBlockScaledMatrix(m).message());
      covered += m.rows;
      w.bytes_ += m.PackedBytes();
    }
    EMBER_CHECK(covered == rows, "expert parts cover {} of {} rows", covered, rows);
  }
  // FP4 parts get packed copies where the active variant has a packed GEMM (each part its own,
  // so a gate / up half need not start at a 16-row group of the whole tensor).
  auto packed = std::make_shared<std::vector<std::shared_ptr<const uint8_t>>>();
  for (auto& expert : parts) {
    if (pack == PackForGemm::kNo) break;
    for (quant::BlockScaledMatrix& m : expert) {
      quant::PackedBuffer copy = quant::MaybePackBlockScaledMatrix(m);
      if (copy == nullptr) continue;
      m.packed = copy.get();
      w.repacked_bytes_ += quant::PackedFp4Bytes(m.format, m.rows, m.cols);
      packed->push_back(std::move(copy));
    }
  }
  if (!packed->empty()) w.packed_owner_ = std::move(packed);
  w.parts_ = std::move(parts);
  w.owner_ = std::move(owner);
  return w;
}

std::optional<quant::WeightFormat> ExpertWeights::format() const {
  if (parts_.empty()) return std::nullopt;
  return parts_.front().front().format;
}

void ExpertWeights::Apply(int64_t expert, const float* x, int64_t n, float* y) const {
  EMBER_CHECK(expert >= 0 && expert < num_experts_, "expert {} of {}", expert, num_experts_);
  if (parts_.empty()) {
    kernels::MatMul(x, n, dense_.Slice0(expert), y);
    return;
  }
  const auto& parts = parts_[expert];
  if (parts.size() == 1) {
    quant::BlockScaledMatMul(x, n, parts.front(), y);
    return;
  }
  // Several row ranges (gate and up halves): each writes a [n, part.rows] block that lands in
  // its columns of y.
  thread_local std::vector<float> scratch;
  int64_t column = 0;
  for (const quant::BlockScaledMatrix& m : parts) {
    scratch.resize(n * m.rows);
    quant::BlockScaledMatMul(x, n, m, scratch.data());
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(scratch.data() + i * m.rows, m.rows, y + i * rows_ + column);
    }
    column += m.rows;
  }
}

void ExpertWeights::ApplyGrouped(std::span<const Group> groups) const {
  for (const Group& g : groups) {
    EMBER_CHECK(g.expert >= 0 && g.expert < num_experts_ && g.n >= 0, "expert {} of {}, n {}", g.expert, num_experts_,
                g.n);
  }
  if (!parts_.empty()) {
    // One quant group per part; the parts of an expert share its input, so its activations are
    // quantized once, and each part writes its columns of y directly (row stride rows_).
    thread_local std::vector<quant::BlockScaledGroup> pieces;  // per thread: no allocation once grown
    pieces.clear();
    for (const Group& g : groups) {
      // An expert no row was routed to has nothing to compute, and its y may be null (which
      // y + column must never offset).
      if (g.n == 0) continue;
      int64_t column = 0;
      for (const quant::BlockScaledMatrix& m : parts_[g.expert]) {
        pieces.push_back({m, g.x, g.n, g.y + column, rows_});
        column += m.rows;
      }
    }
    quant::GroupedBlockScaledMatMul(pieces);
    return;
  }
  // Dense: the active kernel variant on row ranges of each expert; its results do not depend on
  // the range split (kernels/README.md), so each row has kernels::MatMul's bits.
  const int64_t element_bytes = dense_.dtype == DType::kBF16 ? 2 : 4;
  // Per calling thread, bound to references: the pool's workers must read the caller's vectors.
  thread_local std::vector<int64_t> tl_rows, tl_cost;
  thread_local std::vector<quant::GroupRowRange> tl_ranges;
  std::vector<int64_t>& rows = tl_rows;
  std::vector<int64_t>& cost = tl_cost;
  std::vector<quant::GroupRowRange>& ranges = tl_ranges;
  rows.resize(groups.size());
  cost.resize(groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    rows[i] = groups[i].n == 0 ? 0 : rows_;
    cost[i] = cols_ * element_bytes * groups[i].n;
  }
  ThreadPool& pool = ThreadPool::Global();
  quant::SplitGroupRows(rows, cost, pool.num_threads(), ranges);
  const kernels::KernelVariant& variant = kernels::ActiveVariant();
  pool.ParallelFor(static_cast<int64_t>(ranges.size()), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const Group& g = groups[ranges[r].group];
      const TensorView w = dense_.Slice0(g.expert);
      if (w.dtype == DType::kBF16) {
        variant.matmul_bf16(g.x, g.n, cols_, w.As<uint16_t>(), ranges[r].begin, ranges[r].end, g.y, rows_);
      } else {
        variant.matmul_f32(g.x, g.n, cols_, w.As<float>(), ranges[r].begin, ranges[r].end, g.y, rows_);
      }
    }
  });
}

void ExpertWeights::DequantizeRow(int64_t expert, int64_t row, float* out) const {
  EMBER_CHECK(expert >= 0 && expert < num_experts_ && row >= 0 && row < rows_, "expert {} row {}", expert, row);
  if (parts_.empty()) {
    const TensorView r = dense_.Slice0(expert).Slice0(row);
    for (int64_t k = 0; k < cols_; ++k) {
      out[k] = r.dtype == DType::kBF16 ? BF16ToF32(r.As<uint16_t>()[k]) : r.As<float>()[k];
    }
    return;
  }
  for (const quant::BlockScaledMatrix& m : parts_[expert]) {
    if (row < m.rows) {
      quant::DequantizeRow(m, row, out);
      return;
    }
    row -= m.rows;
  }
}

}  // namespace ember
