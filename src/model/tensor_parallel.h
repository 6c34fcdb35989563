// Which slice of a model's weights one tensor-parallel rank holds, and the slicing itself
// (Megatron-LM's layout, as vLLM and nano-vllm shard):
//
//   attention   a block of query heads per rank, with the KV heads those queries read: a block
//               of them when tp divides the KV heads, one KV head replicated on tp / kv ranks
//               when it is the other way round (GQA with few KV heads, Gemma 3's single one)
//   q, k, v, gate, MLP gate/up, experts' gate_up    column-parallel: a block of W's rows
//   o, MLP down, experts' down                      row-parallel: the matching block of columns
//   embedding, lm_head                              vocab-parallel: a block of the vocabulary
//
// A loader asks for each matrix with the MatrixSplit of its role. A block of rows is a view into
// the mapped file (nothing read until the kernels touch it); a block of columns is a copy of just
// those bytes of each row, owned by the Linear. So each rank maps the whole checkpoint but reads
// and keeps only its shard. Everything here is a pure function of (rank, size) and the shapes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "core/status.h"
#include "core/tensor.h"
#include "exec/communicator.h"
#include "model/expert_weights.h"
#include "model/linear.h"
#include "model/quantized_linear.h"
#include "quant/gguf_matmul.h"

namespace ember {

// A block [begin, begin + count) of some dimension.
struct ShardRange {
  int64_t begin = 0;
  int64_t count = 0;
  int64_t end() const { return begin + count; }
};

struct TensorParallelRank {
  int64_t rank = 0;
  int64_t size = 1;

  static TensorParallelRank Of(const exec::Communicator& comm) { return {comm.rank(), comm.world_size()}; }
  bool sharded() const { return size > 1; }
  // This rank's block of n items split evenly; InvalidArgument naming `what` when size does not
  // divide n.
  Expected<ShardRange> Block(int64_t n, std::string_view what) const;
};

// The heads one rank attends with.
struct HeadShard {
  ShardRange q_heads;
  ShardRange kv_heads;
};
// InvalidArgument, saying which sizes would work, when size does not divide the query heads or
// neither of size and the KV heads divides the other.
Expected<HeadShard> ShardHeads(int64_t num_heads, int64_t num_kv_heads, const TensorParallelRank& tp);

// How a loader takes an [out, in] matrix: whole, a block of its rows (column-parallel), or a
// block of its columns (row-parallel).
struct MatrixSplit {
  enum class Kind { kWhole, kRows, kColumns };
  Kind kind = Kind::kWhole;
  ShardRange range;

  static MatrixSplit Whole() { return {}; }
  static MatrixSplit Rows(ShardRange r) { return {Kind::kRows, r}; }
  static MatrixSplit Columns(ShardRange r) { return {Kind::kColumns, r}; }
  // Blocks of `unit` rows / columns each (heads of head_dim): range is in units.
  static MatrixSplit Rows(ShardRange units, int64_t unit) { return Rows({units.begin * unit, units.count * unit}); }
  static MatrixSplit Columns(ShardRange units, int64_t unit) {
    return Columns({units.begin * unit, units.count * unit});
  }
  bool whole() const { return kind == Kind::kWhole; }
};

// The split a tensor-parallel rank takes of each matrix role of a layer.
struct LayerSplits {
  MatrixSplit q, kv, o;        // q rows (and the Muse Spark gate's), k/v rows, o columns
  MatrixSplit ffn_in, ffn_out; // MLP gate/up rows, down columns
  HeadShard heads;             // everything when unsharded
};
// `intermediate` is the MLP's width (0 for none). A GGUF type's blocks of columns are checked
// where a block of columns is cut (SliceQuantized), per tensor.
Expected<LayerSplits> SplitLayer(int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, int64_t intermediate,
                                 const TensorParallelRank& tp);

// The slice `split` of a bf16/f32 [out, in] matrix as a Linear: a view for rows, a copy for
// columns.
Expected<Linear> SliceDense(const TensorView& matrix, const MatrixSplit& split);
// The same for a GGUF matrix; a block of columns must be whole blocks of its type.
Expected<Linear> SliceQuantized(const quant::QuantMatrix& matrix, const MatrixSplit& split);
// The bytes of `split` of a bf16/f32 [out, in] matrix as a [rows, cols] view, plus the copy that
// holds them (null for a view of rows): what load-time quantization reads.
struct SlicedTensor {
  TensorView view;
  std::shared_ptr<const void> owner;
};
Expected<SlicedTensor> SliceTensor(const TensorView& matrix, const MatrixSplit& split);

// A routed-expert stack [E, rows, cols] cut the same way per expert. For gate_up ([E, 2I, Hm],
// `halves` 2: the gate's rows, then the up's) a block of rows takes the block of each half, so
// the result is again [E, 2 * count, Hm] with gate then up.
Expected<SlicedTensor> SliceExpertStack(const TensorView& stacked, const MatrixSplit& split, int64_t halves);

// Expert parallelism: the experts `held` (ascending) of a bf16/f32 stack [E, rows, cols] as a
// stack of their own, a view where they are consecutive, else a copy of just those experts.
Expected<SlicedTensor> SelectExperts(const TensorView& stacked, std::span<const int32_t> held);

// A block-scaled (NVFP4 / MXFP4 / FP8) matrix cut by `split`, copied into a compact buffer the
// result owns, so a rank keeps only its shard (its codes and the scales that cover them). The cut
// may not split a scale block: a block of columns must be whole K blocks (16 NVFP4, 32 MXFP4; 128
// under FP8 128x128 block scales, else 16), and a block of rows of an FP8 128x128-block matrix
// must start and end on multiples of 128. InvalidArgument saying so otherwise: every rank's block
// has the same size, so the ranks agree on refusing.
Expected<OwnedBlockScaledMatrix> SliceBlockScaled(const quant::BlockScaledMatrix& matrix, const MatrixSplit& split);

// Block-scaled routed experts cut per expert as SliceExpertStack cuts a dense stack: a block of
// rows takes that block of each of the `halves` (gate, then up), a block of columns that block of
// every part. The result owns copies; `experts` may be dropped afterwards.
Expected<ExpertWeights> SliceBlockScaledExperts(const ExpertWeights& experts, const MatrixSplit& split,
                                                int64_t halves);

// Load-time quantization (--quantization) of a bf16/f32 [out, in] matrix, then its `split`: the
// whole matrix is quantized first, so a rank's codes and scales are exactly those of one process
// (NVFP4's per-tensor scale and FP8's 128x128 blocks see the whole matrix), and only the shard is
// kept.
Expected<Linear> QuantizeLinear(const TensorView& matrix, quant::WeightFormat format,
                                quant::Mxfp4ScaleRounding mxfp4_rounding, const MatrixSplit& split);

// The experts `held` (ascending) of block-scaled experts, viewing the same bytes (packed for the
// GEMM anew: `experts` may have been read without packing).
Expected<ExpertWeights> SelectBlockScaledExperts(const ExpertWeights& experts, std::span<const int32_t> held);

// The vocabulary block a rank holds of the embedding table and lm_head: a block when size
// divides the vocabulary, else all of it (replicated: every rank looks up and scores everything).
ShardRange VocabShard(int64_t vocab_size, const TensorParallelRank& tp);

}  // namespace ember
