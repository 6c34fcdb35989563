#include "kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"

namespace ember::kernels {
namespace {

// Queries of one request at consecutive positions x consecutive query heads of one KV head, and
// the segments their keys fall in.
struct Tile {
  int64_t request = 0;
  int64_t first_token = 0;  // row of q / out
  int64_t rows = 0;
  int64_t first_head = 0;
  int64_t heads = 0;
  int64_t kv_head = 0;
  int64_t first_segment = 0;
  int64_t num_segments = 0;
  int64_t work = 0;  // queries x keys, to schedule the largest tiles first
};

constexpr int64_t kAlign = 16;  // floats: 64 bytes

int64_t RoundUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// A thread's buffers for one tile call (PagedTileTask's scratch and outputs) and the running
// state of the fold.
struct TileScratch {
  float* key_buf;
  float* value_buf;
  float* weights;
  float* lane_sums;
  float* o;
  float* m;
  float* l;
  float* acc_o;
  float* acc_m;
  float* acc_l;
};

int64_t TileScratchFloats(int64_t stride) {
  const int64_t q = kPagedMaxTileQueries;
  return 2 * kPagedChunkKeys * stride + 2 * q * kPagedChunkKeys + 2 * q * stride + 4 * RoundUp(q);
}

TileScratch CarveTileScratch(float* p, int64_t stride) {
  const int64_t q = kPagedMaxTileQueries;
  TileScratch s;
  s.key_buf = p, p += kPagedChunkKeys * stride;
  s.value_buf = p, p += kPagedChunkKeys * stride;
  s.weights = p, p += q * kPagedChunkKeys;
  s.lane_sums = p, p += q * kPagedChunkKeys;
  s.o = p, p += q * stride;
  s.acc_o = p, p += q * stride;
  s.m = p, p += RoundUp(q);
  s.l = p, p += RoundUp(q);
  s.acc_m = p, p += RoundUp(q);
  s.acc_l = p;
  return s;
}

// One query's segment partial (m, l, o) folded into its running (acc_m, acc_l, acc_o); segments
// arrive in position order, whichever thread computed them. acc_m = -inf: nothing yet.
void Fold(int64_t d, float m, float l, const float* o, float& acc_m, float& acc_l, float* acc_o) {
  if (m == -INFINITY) return;
  if (acc_m == -INFINITY) {
    acc_m = m;
    acc_l = l;
    std::copy(o, o + d, acc_o);
    return;
  }
  const float m_new = std::max(acc_m, m);
  const float a = std::exp(acc_m - m_new);
  const float b = std::exp(m - m_new);
  acc_l = acc_l * a + l * b;
  for (int64_t e = 0; e < d; ++e) acc_o[e] = acc_o[e] * a + o[e] * b;
  acc_m = m_new;
}

}  // namespace

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
  const int64_t d = shape.head_dim;
  const int64_t group = shape.num_heads / shape.num_kv_heads;
  const int64_t q_stride = shape.num_heads * d;
  const int64_t stride = RoundUp(d);
  const PagedAttentionTileFn tile_fn = ActiveVariant().paged_attention_tile;

  // Tiles: each request's rows cut into runs of consecutive positions, then into pieces of as
  // many rows as fill kPagedMaxTileQueries with the heads of one KV head (or `tile_heads` of
  // them). The cut changes which queries share a tile, which the results do not depend on.
  // Scratch kept per thread (here and below): no allocation once grown. Bound to references so
  // the workers read the caller's vectors, not their own thread_local ones.
  thread_local std::vector<Tile> tl_tiles;
  std::vector<Tile>& tiles = tl_tiles;
  auto build_tiles = [&](int64_t tile_heads) {
    const int64_t tile_rows = kPagedMaxTileQueries / tile_heads;
    int64_t items = 0;  // (tile, segment) pairs
    tiles.clear();
    for (int64_t r = 0; r < batch.num_reqs; ++r) {
      const int64_t begin = batch.query_start_loc[r], end = batch.query_start_loc[r + 1];
      EMBER_CHECK(begin <= end, "query_start_loc decreases at {}", r);
      for (int64_t t = begin; t < end;) {
        int64_t rows = 0;
        for (; t + rows < end && rows < tile_rows; ++rows) {
          const int64_t position = batch.positions[t + rows];
          EMBER_CHECK(position >= 0 && position < batch.seq_lens[r] &&
                          position / kv.block_size < batch.max_blocks_per_req,
                      "PagedAttention: position {} of request {} (seq_len {}, {} blocks of {})", position, r,
                      batch.seq_lens[r], batch.max_blocks_per_req, kv.block_size);
          if (rows > 0 && position != batch.positions[t + rows - 1] + 1) break;
        }
        const int64_t first_position = batch.positions[t];
        const int64_t last_position = first_position + rows - 1;
        const int64_t first_key = shape.window > 0 ? std::max<int64_t>(0, first_position - shape.window + 1) : 0;
        Tile tile;
        tile.request = r;
        tile.first_token = t;
        tile.rows = rows;
        tile.first_segment = first_key / kPagedSegmentKeys;
        tile.num_segments = last_position / kPagedSegmentKeys - tile.first_segment + 1;
        for (int64_t kvh = 0; kvh < shape.num_kv_heads; ++kvh) {
          for (int64_t h = kvh * group; h < (kvh + 1) * group; h += tile_heads) {
            tile.first_head = h;
            tile.heads = std::min(tile_heads, (kvh + 1) * group - h);
            tile.kv_head = kvh;
            tile.work = rows * tile.heads * (last_position - first_key + 1);
            tiles.push_back(tile);
            items += tile.num_segments;
          }
        }
        t += rows;
      }
    }
    return items;
  };
  ThreadPool& pool = ThreadPool::Global();
  const int64_t full_heads = std::min(group, kPagedMaxTileQueries);
  const int64_t items = build_tiles(full_heads);
  // Too few (tile, segment) items for the threads (decode of one or two requests, a short
  // context, few KV heads: Gemma 3 270M has one): split the heads of each KV head over more
  // tiles. Each tile widens its K/V again, but every thread gets work.
  const int64_t wanted = 2 * int64_t{pool.num_threads()};
  if (pool.num_threads() > 1 && items < wanted && full_heads > 1) {
    const int64_t split = std::min(full_heads, (wanted + items - 1) / items);
    build_tiles((full_heads + split - 1) / split);
  }
  // Largest first: the pool hands out contiguous chunks of tiles, so the small ones finish last.
  // (std::sort, not stable_sort, which allocates; the order changes no result.)
  std::sort(tiles.begin(), tiles.end(), [](const Tile& a, const Tile& b) { return a.work > b.work; });

  const int64_t scratch_floats = TileScratchFloats(stride);
  thread_local std::vector<float> tl_scratch;
  std::vector<float>& scratch = tl_scratch;
  const size_t scratch_size = static_cast<size_t>(scratch_floats * pool.num_threads() + kAlign);
  if (scratch.size() < scratch_size) scratch.resize(scratch_size);
  float* const scratch_base =
      scratch.data() + (kAlign - reinterpret_cast<uintptr_t>(scratch.data()) / sizeof(float) % kAlign) % kAlign;
  auto thread_scratch = [&] {
    return CarveTileScratch(scratch_base + ThreadPool::ThreadIndex() * scratch_floats, stride);
  };
  auto make_task = [&](const Tile& tile, int64_t segment, const TileScratch& s) {
    PagedTileTask task;
    task.q = q + tile.first_token * q_stride + tile.first_head * d;
    task.q_row_stride = q_stride;
    task.num_rows = tile.rows;
    task.num_heads = tile.heads;
    task.first_position = batch.positions[tile.first_token];
    task.window = shape.window;
    task.scale = shape.scale;
    task.block_row = batch.block_table + tile.request * batch.max_blocks_per_req;
    task.kv_head = tile.kv_head;
    task.key_begin = segment * kPagedSegmentKeys;
    task.key_end = task.key_begin + kPagedSegmentKeys;
    task.stride = stride;
    task.key_buf = s.key_buf;
    task.value_buf = s.value_buf;
    task.weights = s.weights;
    task.lane_sums = s.lane_sums;
    task.o = s.o;
    task.m = s.m;
    task.l = s.l;
    return task;
  };
  // Partials (m, l, o) of a tile's segments [0, count), folded in order; then normalised.
  auto fold_and_write = [&](const Tile& tile, const TileScratch& s, auto&& partial_of) {
    const int64_t queries = tile.rows * tile.heads;
    std::fill(s.acc_m, s.acc_m + queries, -INFINITY);
    for (int64_t k = 0; k < tile.num_segments; ++k) {
      const PagedTileTask p = partial_of(k);
      for (int64_t i = 0; i < queries; ++i) {
        Fold(d, p.m[i], p.l[i], p.o + i * stride, s.acc_m[i], s.acc_l[i], s.acc_o + i * stride);
      }
    }
    for (int64_t i = 0; i < queries; ++i) {
      const float inv = 1.0f / s.acc_l[i];
      const float* acc = s.acc_o + i * stride;
      float* o = out + (tile.first_token + i / tile.heads) * q_stride + (tile.first_head + i % tile.heads) * d;
      for (int64_t e = 0; e < d; ++e) o[e] = acc[e] * inv;
    }
  };

  const int64_t num_tiles = static_cast<int64_t>(tiles.size());
  if (pool.num_threads() == 1 || num_tiles >= 2 * pool.num_threads()) {
    // Enough tiles for every thread: each runs its tiles' segments in order and folds as it goes.
    pool.ParallelFor(num_tiles, [&](int64_t begin, int64_t end) {
      const TileScratch s = thread_scratch();
      for (int64_t n = begin; n < end; ++n) {
        const Tile& tile = tiles[n];
        fold_and_write(tile, s, [&](int64_t k) {
          const PagedTileTask task = make_task(tile, tile.first_segment + k, s);
          tile_fn(kv, task);
          return task;
        });
      }
    });
    return;
  }
  // Few tiles (decode with few requests, long contexts): one work item per (tile, segment), each
  // writing its partial to its own slot, then the same in-order fold per tile.
  thread_local std::vector<int64_t> tl_item_begin;
  std::vector<int64_t>& item_begin = tl_item_begin;
  item_begin.assign(num_tiles + 1, 0);
  for (int64_t n = 0; n < num_tiles; ++n) item_begin[n + 1] = item_begin[n] + tiles[n].num_segments;
  const int64_t partial_floats = kPagedMaxTileQueries * stride + 2 * RoundUp(kPagedMaxTileQueries);
  thread_local std::vector<float> tl_partials;
  std::vector<float>& partials = tl_partials;
  // Sized for as many segments as a tile's keys can touch given the block tables (or the window
  // plus a tile's rows), so it grows only when a step's tables are wider than any before, not as
  // each context grows.
  const int64_t table_keys = batch.max_blocks_per_req * kv.block_size;
  const int64_t most_keys =
      shape.window > 0 ? std::min<int64_t>(shape.window + kPagedMaxTileQueries - 1, table_keys) : table_keys;
  const int64_t most_segments = (most_keys + kPagedSegmentKeys - 1) / kPagedSegmentKeys + 1;
  const size_t partials_size = static_cast<size_t>(partial_floats * num_tiles * most_segments + kAlign);
  const int64_t num_items = item_begin[num_tiles];
  EMBER_CHECK(num_items <= num_tiles * most_segments, "PagedAttention: {} segments for {} tiles", num_items, num_tiles);
  if (partials.size() < partials_size) partials.resize(partials_size);
  float* const partials_base =
      partials.data() + (kAlign - reinterpret_cast<uintptr_t>(partials.data()) / sizeof(float) % kAlign) % kAlign;
  auto partial_task = [&](int64_t item, const Tile& tile, int64_t k, const TileScratch& s) {
    PagedTileTask task = make_task(tile, tile.first_segment + k, s);
    float* p = partials_base + item * partial_floats;
    task.o = p;
    task.m = p + kPagedMaxTileQueries * stride;
    task.l = task.m + RoundUp(kPagedMaxTileQueries);
    return task;
  };
  pool.ParallelFor(num_items, [&](int64_t begin, int64_t end) {
    const TileScratch s = thread_scratch();
    int64_t n = std::upper_bound(item_begin.begin(), item_begin.end(), begin) - item_begin.begin() - 1;
    for (int64_t item = begin; item < end; ++item) {
      while (item >= item_begin[n + 1]) ++n;
      tile_fn(kv, partial_task(item, tiles[n], item - item_begin[n], s));
    }
  });
  pool.ParallelFor(num_tiles, [&](int64_t begin, int64_t end) {
    const TileScratch s = thread_scratch();
    for (int64_t n = begin; n < end; ++n) {
      fold_and_write(tiles[n], s, [&](int64_t k) { return partial_task(item_begin[n] + k, tiles[n], k, s); });
    }
  });
}

}  // namespace ember::kernels
