// GroupedBlockScaledMatMul: many small block-scaled matmuls (a MoE layer's active experts, each
// with the rows of the tokens routed to it) in one thread-pool dispatch instead of one per matrix.
// At batch 1 a Muse layer has 4 active experts x 2 matrices of under 1 MB: per-matrix dispatches
// cost a pool wake-up and a barrier each, about as long as the matrix itself takes to stream.
//
// The work items are (group, output-row range) pairs over all groups, sized by the bytes they
// stream (SplitGroupRows), so the threads share the total evenly whatever the group sizes. Each
// output row is computed by BlockScaledMatMulRows exactly as BlockScaledMatMul computes it, so
// every row's bits are those of the per-matrix call (and independent of the other groups, the
// split and the thread count).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quant/block_scaled.h"

namespace ember::quant {

// y[i * ldy + j] = (x · W^T)[i, j] for i in [0, m), j in [0, w.rows). Groups may share x (the
// gate and up halves of a fused tensor): consecutive groups with the same x, m, cols and FP4-ness
// quantize it once.
struct BlockScaledGroup {
  BlockScaledMatrix w;
  const float* x = nullptr;  // [m, w.cols]
  int64_t m = 0;
  float* y = nullptr;
  int64_t ldy = 0;  // >= w.rows
};

// Runs every group: activations prepared first (one parallel loop, run inline when small), then
// one ParallelFor over the row ranges of all groups. Every w must pass ValidateBlockScaledMatrix
// (checked).
void GroupedBlockScaledMatMul(std::span<const BlockScaledGroup> groups);

// A work item: rows [begin, end) of group `group`.
struct GroupRowRange {
  int64_t group, begin, end;
};

// Splits each group's `rows[g]` output rows into ranges of about equal cost (cost_per_row[g] per
// row, e.g. the weight bytes a row streams times its activation rows), with about 8 ranges per
// thread over the total and none below kMinChunkBytes of cost, range boundaries at multiples of
// kRowTile. In group order, rows ascending. Shared with the dense grouped expert matmul
// (model/expert_weights.cc), so both balance the same way.
// Writes the ranges into `ranges` (cleared first), so a caller that keeps the vector between
// calls allocates only when a step needs more ranges than any before.
void SplitGroupRows(std::span<const int64_t> rows, std::span<const int64_t> cost_per_row, int threads,
                    std::vector<GroupRowRange>& ranges);
std::vector<GroupRowRange> SplitGroupRows(std::span<const int64_t> rows, std::span<const int64_t> cost_per_row,
                                          int threads);

}  // namespace ember::quant
