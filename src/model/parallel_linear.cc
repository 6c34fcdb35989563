#include "model/parallel_linear.h"

namespace ember {

void ColumnParallelApply(const Linear& shard, const float* x, int64_t m, float* y) {
  // Every rank has the whole input, so its output columns need nothing from the others.
  shard.Apply(x, m, y);
}

void ColumnParallelApplyShared(std::span<const Linear* const> shards, const float* x, int64_t m,
                               std::span<float* const> ys) {
  Linear::ApplyShared(shards, x, m, ys);
}

void RowParallelApply(const Linear& shard, const float* x_shard, int64_t m, float* y, exec::Communicator& comm) {
  shard.Apply(x_shard, m, y);
  comm.AllReduceSum(y, m * shard.out_features());
}

}  // namespace ember
