// Causal grouped-query attention over a paged KV cache for a ragged batch of requests
// (vLLM's PagedAttention layout), with an optional sliding window per layer.
//
// K and V live in blocks of `block_size` token slots: [num_blocks, block_size, num_kv_heads,
// head_dim] in the stored dtype (f32, f16, bf16 or fp8 e4m3 with one f32 scale per (slot, KV
// head)); a request's block table row maps its logical block j (positions [j*bs, (j+1)*bs)) to a
// physical block. Keys are converted to f32 on the fly; scores, softmax and the weighted sum of
// values are f32.
//
// Batch invariance: every (query, head) is computed by one call of the active variant whose
// operation sequence depends only on head_dim, the query's own position and its keys, never on
// the other requests in the batch, how the prompt was chunked or the thread count. A request's
// output is therefore bitwise identical alone or batched.
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

// One query head over keys at positions [first_key, last_key] of one request: the unit of work
// a variant implements (KernelVariant::paged_attention_head).
struct PagedHeadTask {
  const float* q = nullptr;            // [head_dim]
  const int32_t* block_row = nullptr;  // the request's block table row
  int64_t kv_head = 0;
  int64_t first_key = 0;
  int64_t last_key = 0;
  float scale = 1.0f;
  float* scores = nullptr;  // scratch of last_key - first_key + 1 floats
  float* out = nullptr;     // [head_dim]
};

// q, out: [num_tokens, num_heads * head_dim]. The K/V of every query's own position (and of all
// earlier positions it may see) must already be in `kv`: write this step's rows first. A query at
// position p reads keys j with j <= p and, with a window W, j > p - W. Threaded over
// (token, head) pairs with the active kernel variant (kernels/matmul.h).
void PagedAttention(const float* q, int64_t num_tokens, const PagedBatch& batch, const PagedKvView& kv,
                    const AttentionShape& shape, float* out);

}  // namespace ember::kernels
