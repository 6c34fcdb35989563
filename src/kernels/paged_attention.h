// Causal grouped-query attention over a paged KV cache for a ragged batch of requests
// (vLLM's PagedAttention layout), with an optional sliding window per layer.
//
// K and V live in blocks of `block_size` token slots: [num_blocks, block_size, num_kv_heads,
// head_dim] in the stored dtype (f32, f16, bf16 or fp8 e4m3 with one f32 scale per (slot, KV
// head)); a request's block table row maps its logical block j (positions [j*bs, (j+1)*bs)) to a
// physical block. Keys are converted to f32 on the fly; scores, softmax and the weighted sum of
// values are f32.
//
// Batch invariance: the operation sequence for every (query, head) depends only on head_dim, the
// query's own position and its keys (with the fixed chunk and segment partition below), never
// on the other requests in the batch, the other queries of its tile, how the prompt was
// chunked or the thread count. A request's output is therefore bitwise identical alone or
// batched.
#pragma once

#include <cstdint>

#include "core/dtypes.h"

namespace ember::kernels {

struct AttentionShape {
  int64_t num_heads = 0;     // query heads
  int64_t num_kv_heads = 0;  // query head h reads KV head h / (num_heads / num_kv_heads)
  int64_t head_dim = 0;
  float scale = 1.0f;        // multiplies q·k before the softmax
  int64_t window = -1;       // keys per query including itself; -1 = unbounded (full attention)
};

// One layer's paged K/V as stored.
struct PagedKvView {
  DType dtype = DType::kF32;  // kF32, kF16, kBF16 or kF8E4M3
  const void* keys = nullptr;    // [num_blocks, block_size, num_kv_heads, head_dim]
  const void* values = nullptr;
  const float* key_scales = nullptr;    // kF8E4M3 only: [num_blocks, block_size, num_kv_heads]
  const float* value_scales = nullptr;  // the stored value is code * scale
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

// The ragged batch: request r owns query rows [query_start_loc[r], query_start_loc[r+1]).
struct PagedBatch {
  int64_t num_reqs = 0;
  const int32_t* query_start_loc = nullptr;  // [num_reqs + 1]
  const int32_t* positions = nullptr;        // [num_tokens]: each query's position in its sequence
  const int32_t* seq_lens = nullptr;         // [num_reqs]: every position must be < seq_lens[r]
  const int32_t* block_table = nullptr;      // [num_reqs, max_blocks_per_req]
  int64_t max_blocks_per_req = 0;
};

// The tiled kernel's fixed partition of the keys, by absolute position from 0, so that what a
// query computes never depends on where its tile, chunk or segment starts:
//   * a chunk of kPagedChunkKeys keys is one step of the online softmax (running max and sum
//     per query, rescaled per chunk);
//   * a segment of kPagedSegmentKeys keys (16 chunks) is what one call of a variant's tile
//     function covers; PagedAttention folds a query's segment partials in position order, the
//     same fold whether one thread ran all of them or each ran on another thread (long-context
//     decode with few requests splits over segments to keep every thread busy).
inline constexpr int64_t kPagedChunkKeys = 16;
inline constexpr int64_t kPagedSegmentKeys = 256;
// The most queries (positions x heads of one KV head) a tile holds.
inline constexpr int64_t kPagedMaxTileQueries = 32;

// One tile over one segment: the unit of work a variant implements
// (KernelVariant::paged_attention_tile). The tile's queries are `num_rows` consecutive positions
// first_position, first_position + 1, ... of one request times `num_heads` consecutive query
// heads that all read `kv_head`; query i is (row i / num_heads, head i % num_heads). Query i at
// position p sees the keys j of [key_begin, key_end) with j <= p and, with a window W,
// j > p - W. For each query the variant returns the unnormalised softmax partial over the keys
// it sees: m (their largest score, -inf if it sees none), l = sum exp(s - m) and
// o = sum exp(s - m) v. Each query's partial must depend only on its own q and the keys it sees,
// never on the tile's other queries: that is the batch-invariance contract.
struct PagedTileTask {
  const float* q = nullptr;    // query (row 0, head 0); head h of row r at q + r * q_row_stride + h * head_dim
  int64_t q_row_stride = 0;    // floats
  int64_t num_rows = 0;
  int64_t num_heads = 0;       // num_rows * num_heads <= kPagedMaxTileQueries
  int64_t first_position = 0;
  int64_t window = -1;         // as AttentionShape::window
  float scale = 1.0f;
  const int32_t* block_row = nullptr;  // the request's block table row
  int64_t kv_head = 0;
  int64_t key_begin = 0;  // a multiple of kPagedSegmentKeys
  int64_t key_end = 0;    // key_begin + kPagedSegmentKeys
  // Row stride of the buffers below: head_dim rounded up to a multiple of 16 floats.
  int64_t stride = 0;
  // Scratch, 64-byte aligned: keys and values of one chunk widened to f32 [kPagedChunkKeys,
  // stride]; softmax weights and per-lane running sums [queries, kPagedChunkKeys].
  float* key_buf = nullptr;
  float* value_buf = nullptr;
  float* weights = nullptr;
  float* lane_sums = nullptr;
  // Outputs per query: o [queries, stride] (64-byte aligned; entries past head_dim are
  // scratch), m and l [queries].
  float* o = nullptr;
  float* m = nullptr;
  float* l = nullptr;
};

// q, out: [num_tokens, num_heads * head_dim]. The K/V of every query's own position (and of all
// earlier positions it may see) must already be in `kv`: write this step's rows first. A query at
// position p reads keys j with j <= p and, with a window W, j > p - W. The queries of each
// request are cut into tiles (runs of consecutive positions x the query heads of one KV head),
// and the tiles, or for a small batch the (tile, segment) pairs, are threaded over the global
// pool with the active kernel variant (kernels/matmul.h).
void PagedAttention(const float* q, int64_t num_tokens, const PagedBatch& batch, const PagedKvView& kv,
                    const AttentionShape& shape, float* out);

}  // namespace ember::kernels
