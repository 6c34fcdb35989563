#include "kernels/paged_attention.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"

namespace ember::kernels {

void PagedAttention(const float* q, int64_t num_tokens, const PagedBatch& batch, const PagedKvView& kv,
                    const AttentionShape& shape, float* out) {
  EMBER_CHECK(shape.num_kv_heads > 0 && shape.num_heads % shape.num_kv_heads == 0,
              "PagedAttention: {} query heads, {} KV heads", shape.num_heads, shape.num_kv_heads);
  EMBER_CHECK(kv.num_kv_heads == shape.num_kv_heads && kv.head_dim == shape.head_dim,
              "PagedAttention: cache holds {} x {} KV heads, the layer wants {} x {}", kv.num_kv_heads, kv.head_dim,
              shape.num_kv_heads, shape.head_dim);
  EMBER_CHECK(kv.dtype == DType::kF32 || kv.dtype == DType::kF16 || kv.dtype == DType::kBF16 ||
                  kv.dtype == DType::kF8E4M3,
              "PagedAttention: KV dtype {}", DTypeName(kv.dtype));
  EMBER_CHECK(batch.query_start_loc[0] == 0 && batch.query_start_loc[batch.num_reqs] == num_tokens,
              "PagedAttention: query_start_loc covers [{}, {}) of {} tokens", batch.query_start_loc[0],
              batch.query_start_loc[batch.num_reqs], num_tokens);
  // Scratch kept per thread (here and for the scores below): no allocation once grown. Bound to
  // a reference so the workers read the caller's vector, not their own thread_local one.
  thread_local std::vector<int32_t> tl_request_of;
  std::vector<int32_t>& request_of = tl_request_of;
  request_of.resize(num_tokens);
  for (int64_t r = 0; r < batch.num_reqs; ++r) {
    EMBER_CHECK(batch.query_start_loc[r] <= batch.query_start_loc[r + 1], "query_start_loc decreases at {}", r);
    std::fill(request_of.begin() + batch.query_start_loc[r], request_of.begin() + batch.query_start_loc[r + 1],
              static_cast<int32_t>(r));
  }
  const int64_t d = shape.head_dim;
  const int64_t group = shape.num_heads / shape.num_kv_heads;
  const int64_t q_stride = shape.num_heads * d;
  const PagedAttentionHeadFn head_fn = ActiveVariant().paged_attention_head;
  // Scores scratch: a slice per pool thread, each with room for every key the batch's block
  // tables can hold (or the window), so it grows only when a step's tables are wider than any
  // before, not as each context grows.
  ThreadPool& pool = ThreadPool::Global();
  const int64_t table_keys = int64_t{batch.max_blocks_per_req} * kv.block_size;
  const int64_t most_keys = shape.window > 0 ? std::min<int64_t>(shape.window, table_keys) : table_keys;
  thread_local std::vector<float> tl_scores;
  std::vector<float>& scores = tl_scores;
  const size_t scores_floats = static_cast<size_t>(most_keys) * pool.num_threads();
  if (scores.size() < scores_floats) scores.resize(scores_floats);
  pool.ParallelFor(
      num_tokens * shape.num_heads,
      [&](int64_t begin, int64_t end) {
        float* thread_scores = scores.data() + ThreadPool::ThreadIndex() * most_keys;
        for (int64_t item = begin; item < end; ++item) {
          const int64_t token = item / shape.num_heads;
          const int64_t head = item % shape.num_heads;
          const int64_t r = request_of[token];
          const int64_t position = batch.positions[token];
          EMBER_CHECK(position >= 0 && position < batch.seq_lens[r] &&
                          position / kv.block_size < batch.max_blocks_per_req,
                      "PagedAttention: position {} of request {} (seq_len {}, {} blocks of {})", position, r,
                      batch.seq_lens[r], batch.max_blocks_per_req, kv.block_size);
          PagedHeadTask task;
          task.q = q + token * q_stride + head * d;
          task.block_row = batch.block_table + r * batch.max_blocks_per_req;
          task.kv_head = head / group;
          task.first_key = shape.window > 0 ? std::max<int64_t>(0, position - shape.window + 1) : 0;
          task.last_key = position;
          task.scale = shape.scale;
          task.scores = thread_scores;  // position - first_key + 1 <= most_keys floats
          task.out = out + token * q_stride + head * d;
          head_fn(kv, task);
        }
      },
      4);
}

}  // namespace ember::kernels
