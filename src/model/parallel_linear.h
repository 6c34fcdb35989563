// Tensor-parallel use of a Linear (Megatron-LM's column- and row-parallel layers; nano-vllm's
// layers/linear.py): the call site says how its weight is split across the ranks of `comm`.
//
//   column-parallel  this rank holds a block of W's output rows, so y is this rank's block of the
//                    output columns (a block of attention heads, of the MLP's intermediate width)
//                    and the next layer consumes it as it is: no collective
//   row-parallel     this rank holds the matching block of W's input columns and multiplies the
//                    shard a column-parallel layer left it; the partial products are summed over
//                    the ranks with AllReduceSum (attention's o_proj, the MLP's down projection)
//
// Which shard a rank holds is the loader's business (a later sharding plan); these only fix
// where the collective goes. Over one process (world size 1) the shard is the whole matrix and
// both compute exactly what Linear::Apply computes.
#pragma once

#include <cstdint>
#include <span>

#include "exec/communicator.h"
#include "model/linear.h"

namespace ember {

// y [m, shard.out_features()] = x [m, in] · shard^T: this rank's block of the output columns.
void ColumnParallelApply(const Linear& shard, const float* x, int64_t m, float* y);

// ys[i] = ColumnParallelApply(*shards[i], x, m): shards that read the same input (q/k/v, gate/up)
// share its quantized rows (Linear::ApplyShared).
void ColumnParallelApplyShared(std::span<const Linear* const> shards, const float* x, int64_t m,
                               std::span<float* const> ys);

// y [m, out] = sum over the ranks of x_shard [m, shard.in_features()] · shard^T; every rank ends
// with the same y.
void RowParallelApply(const Linear& shard, const float* x_shard, int64_t m, float* y, exec::Communicator& comm);

}  // namespace ember
