// The tiled paged-attention kernel shared by the fast variants (generic, avx2, avx512): one
// tile of queries (consecutive positions x the query heads of one KV head) over one segment of
// keys (kernels/paged_attention.h, PagedTileTask), templated on a SIMD struct S each variant
// defines in its unnamed namespace:
//
//   using Vec; static constexpr int kLanes;                 // 8 or 16, divides kPagedChunkKeys
//   static constexpr int kValueRows, kValueVecs;            // the value tile: queries x vectors
//   Vec Zero(); Vec Set1(float); Vec Add(Vec, Vec); Vec Sub(Vec, Vec); Vec Mul(Vec, Vec);
//   Vec Max(Vec, Vec); Vec Fma(Vec a, Vec b, Vec c)  // a * b + c
//   Vec LoadF32(const float*); Vec LoadF32Tail(const float*, int64_t n)  // n < kLanes, rest 0
//   void Store(float*, Vec)                                  // 64-byte aligned buffers
//   template <DType T> Vec Load(const uint8_t*); template <DType T> Vec LoadTail(const uint8_t*, int64_t n)
//       kLanes stored elements of type T widened to f32 (fp8: the e4m3 value, unscaled)
//   Vec Exp(Vec x)       // e^x for x <= 0; exactly 0 below kExpMin (so for -inf), 1 at 0, NaN stays NaN
//   Vec KeepLanes(Vec x, int64_t lo, int64_t hi, float fill)  // lanes l in [lo, hi] keep x, others fill
//   float ReduceMax(Vec); float Sum(Vec)                     // Sum: a fixed reduction tree
//   static constexpr int kScoreKeys; void ReduceScores(const Vec* acc, float* out)
//       out[j] = Sum(acc[j]) for j < kScoreKeys (a divisor of kPagedChunkKeys), all at once
//       (a transpose-and-add whose stages add the lane pairs Sum's tree adds, so each result
//       is the bits Sum(acc[j]) gives: a score never depends on the other keys of the chunk)
//
// Per tile and segment: the keys the tile's queries see are walked chunk by chunk (chunks of
// kPagedChunkKeys aligned to position 0). Each chunk's K and V rows are widened to f32 once into
// the L1 buffers key_buf / value_buf and used by every query of the tile. Per query that sees
// any key of the chunk (online softmax, flash-attention style; the alphas of all the tile's
// queries come from one vector exp between a scores pass and a weights pass, so that one
// query's chain of dependent exps does not hold up the next):
//   s_j      = (q . k_j) [* k_scale_j] * scale for the chunk's 16 keys; keys the query does not
//              see are replaced by -inf (a select: their values never enter any sum)
//   m'       = max(m, max_j s_j)                      (exact, any order)
//   alpha    = Exp(m - m')                            (0 when m = -inf: the query's first chunk)
//   p_j      = Exp(s_j - m')                          (0 for the unseen keys)
//   lsum     = lsum * alpha + p                       (one FMA per lane: lane j holds keys j mod 16)
//   o        = o * alpha, then o += p_j [* v_scale_j] v_j for the seen keys j in position order
// and at the end of the segment l = Sum(lsum lanes). o starts at +0 and is never -0, so the
// query's first rescale by alpha = 0 gives +0 exactly. The value loop runs over the keys a query
// sees and no others: queries of a chunk are grouped into runs with the same seen range, and a
// run's register tile only changes how many rows are in flight, not any row's operation
// sequence. So a query's m, l and o depend on its own q and keys only: not on the tile's other
// queries, which chunk or segment the tile starts in, or the thread.
//
// No STL and no non-template inline helpers here: this header is compiled with ISA flags
// (see kernels/README.md, "Adding a variant").
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/paged_attention.h"

namespace ember::kernels::cpu {

template <DType T>
constexpr int64_t kPagedElementBytes = T == DType::kF32 ? 4 : (T == DType::kF8E4M3 ? 1 : 2);

// fn(position, row) for the keys [first, last] of the tile's KV head, in order, where row indexes
// the cache's [block * block_size + offset][kv_head] rows: one block-table lookup per run of keys
// in one cache block.
template <class Fn>
void ForEachKvRow(const PagedKvView& kv, const PagedTileTask& t, int64_t first, int64_t last, Fn&& fn) {
  for (int64_t position = first; position <= last;) {
    const int64_t offset = position % kv.block_size;
    const int64_t left = kv.block_size - offset;
    const int64_t n = left < last - position + 1 ? left : last - position + 1;
    int64_t row = (int64_t{t.block_row[position / kv.block_size]} * kv.block_size + offset) * kv.num_kv_heads + t.kv_head;
    for (int64_t i = 0; i < n; ++i, ++position, row += kv.num_kv_heads) fn(position, row);
  }
}

// Widens the K and V rows of keys [first, last] (one chunk starting at `chunk`) into the tile's
// buffers, zero-padding each row's last vector past head_dim; fp8 row scales go to the scale
// arrays.
template <class S, DType T>
void WidenChunk(const PagedKvView& kv, const PagedTileTask& t, int64_t chunk, int64_t first, int64_t last,
                float* key_scales, float* value_scales) {
  constexpr int64_t kLanes = S::kLanes;
  constexpr int64_t kBytes = kPagedElementBytes<T>;
  const int64_t d = kv.head_dim;
  const int64_t full = d / kLanes * kLanes;
  const int64_t tail = d - full;
  const auto* keys = static_cast<const uint8_t*>(kv.keys);
  const auto* values = static_cast<const uint8_t*>(kv.values);
  ForEachKvRow(kv, t, first, last, [&](int64_t position, int64_t row) {
    const uint8_t* k = keys + row * d * kBytes;
    const uint8_t* v = values + row * d * kBytes;
    float* kb = t.key_buf + (position - chunk) * t.stride;
    float* vb = t.value_buf + (position - chunk) * t.stride;
    for (int64_t e = 0; e < full; e += kLanes) {
      S::Store(kb + e, S::template Load<T>(k + e * kBytes));
      S::Store(vb + e, S::template Load<T>(v + e * kBytes));
    }
    if (tail > 0) {
      S::Store(kb + full, S::template LoadTail<T>(k + full * kBytes, tail));
      S::Store(vb + full, S::template LoadTail<T>(v + full * kBytes, tail));
    }
    if constexpr (T == DType::kF8E4M3) {
      key_scales[position - chunk] = kv.key_scales[row];
      value_scales[position - chunk] = kv.value_scales[row];
    }
  });
}

// Requests the K and V rows of keys [first, last] into the cache: the next chunk's, while this
// one is computed. A KV head's rows are strided (the other heads' rows sit between them) and
// blocks are scattered, so the hardware prefetchers miss them: long-context decode, which
// streams every key once, otherwise waits on memory for each row.
template <DType T>
void PrefetchChunk(const PagedKvView& kv, const PagedTileTask& t, int64_t first, int64_t last) {
  constexpr int64_t kBytes = kPagedElementBytes<T>;
  const int64_t row_bytes = kv.head_dim * kBytes;
  const auto* keys = static_cast<const uint8_t*>(kv.keys);
  const auto* values = static_cast<const uint8_t*>(kv.values);
  ForEachKvRow(kv, t, first, last, [&](int64_t, int64_t row) {
    for (int64_t b = 0; b < row_bytes; b += 64) {
      __builtin_prefetch(keys + row * row_bytes + b);
      __builtin_prefetch(values + row * row_bytes + b);
    }
  });
}

// scores[j] = q . keys[j * stride ..] for the chunk's kPagedChunkKeys keys: per key one
// kLanes-wide FMA chain over head_dim (the q tail masked, the key rows zero past head_dim), then
// the variant's reduction, kScoreKeys keys at a time.
template <class S>
__attribute__((always_inline)) inline void ChunkScores(const float* q, const float* keys, int64_t stride, int64_t d,
                                                       float* scores) {
  using Vec = typename S::Vec;
  constexpr int64_t kLanes = S::kLanes;
  constexpr int kKeys = S::kScoreKeys;
  const int64_t full = d / kLanes * kLanes;
  for (int64_t k0 = 0; k0 < kPagedChunkKeys; k0 += kKeys) {
    const float* k = keys + k0 * stride;
    Vec acc[kKeys];
#pragma GCC unroll 16
    for (int j = 0; j < kKeys; ++j) acc[j] = S::Zero();
    for (int64_t e = 0; e < full; e += kLanes) {
      const Vec qv = S::LoadF32(q + e);
#pragma GCC unroll 16
      for (int j = 0; j < kKeys; ++j) acc[j] = S::Fma(qv, S::LoadF32(k + j * stride + e), acc[j]);
    }
    if (full < d) {
      const Vec qv = S::LoadF32Tail(q + full, d - full);
#pragma GCC unroll 16
      for (int j = 0; j < kKeys; ++j) acc[j] = S::Fma(qv, S::LoadF32(k + j * stride + full), acc[j]);
    }
    S::ReduceScores(acc, scores + k0);
  }
}

// o[r] = o[r] * alpha[r] + sum over keys j in [first, last] of weights[r][j] * values[j], for R
// query rows and E vectors of each row starting at the same offset; j in increasing order.
template <class S, int R, int E>
void ValueTile(const float* weights, const float* alpha, float* o, int64_t stride, const float* values,
               int64_t first, int64_t last) {
  using Vec = typename S::Vec;
  constexpr int64_t kLanes = S::kLanes;
  Vec acc[R][E];
  for (int r = 0; r < R; ++r) {
    const Vec a = S::Set1(alpha[r]);
    for (int c = 0; c < E; ++c) acc[r][c] = S::Mul(S::LoadF32(o + r * stride + c * kLanes), a);
  }
  for (int64_t j = first; j <= last; ++j) {
    Vec v[E];
    for (int c = 0; c < E; ++c) v[c] = S::LoadF32(values + j * stride + c * kLanes);
    for (int r = 0; r < R; ++r) {
      const Vec w = S::Set1(weights[r * kPagedChunkKeys + j]);
      for (int c = 0; c < E; ++c) acc[r][c] = S::Fma(w, v[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < E; ++c) S::Store(o + r * stride + c * kLanes, acc[r][c]);
  }
}

template <class S, int R, int E>
void ValueTileVecs(int vecs, const float* weights, const float* alpha, float* o, int64_t stride,
                   const float* values, int64_t first, int64_t last) {
  if constexpr (E >= 1) {
    if (vecs == E) return ValueTile<S, R, E>(weights, alpha, o, stride, values, first, last);
    ValueTileVecs<S, R, E - 1>(vecs, weights, alpha, o, stride, values, first, last);
  }
}

template <class S, int R>
void ValueTileRows(int rows, int vecs, const float* weights, const float* alpha, float* o, int64_t stride,
                   const float* values, int64_t first, int64_t last) {
  if constexpr (R >= 1) {
    if (rows == R) return ValueTileVecs<S, R, S::kValueVecs>(vecs, weights, alpha, o, stride, values, first, last);
    ValueTileRows<S, R - 1>(rows, vecs, weights, alpha, o, stride, values, first, last);
  }
}

// The value update of queries [begin, end), which all see keys [first, last] of the chunk
// (indices from the chunk's start), over the `width` computed floats of their rows.
template <class S>
void ValueRun(const PagedTileTask& t, int64_t begin, int64_t end, int64_t first, int64_t last, const float* alpha,
              int64_t width) {
  constexpr int64_t kRows = S::kValueRows;
  constexpr int64_t kStep = int64_t{S::kValueVecs} * S::kLanes;
  for (int64_t r0 = begin; r0 < end; r0 += kRows) {
    const int rows = static_cast<int>(end - r0 < kRows ? end - r0 : kRows);
    for (int64_t e0 = 0; e0 < width; e0 += kStep) {
      const int vecs = static_cast<int>((width - e0 < kStep ? width - e0 : kStep) / S::kLanes);
      ValueTileRows<S, S::kValueRows>(rows, vecs, t.weights + r0 * kPagedChunkKeys, alpha + r0,
                                      t.o + r0 * t.stride + e0, t.stride, t.value_buf + e0, first, last);
    }
  }
}

template <class S, DType T>
void PagedAttentionTileTyped(const PagedKvView& kv, const PagedTileTask& t) {
  using Vec = typename S::Vec;
  constexpr int64_t kLanes = S::kLanes;
  constexpr int64_t kChunk = kPagedChunkKeys;
  constexpr int kVecs = static_cast<int>(kChunk / kLanes);
  static_assert(kChunk % kLanes == 0);
  const int64_t d = kv.head_dim;
  const int64_t width = (d + kLanes - 1) / kLanes * kLanes;
  const int64_t queries = t.num_rows * t.num_heads;

  // Each query's keys in this segment, [first[i], last[i]] (empty when first > last).
  int64_t first[kPagedMaxTileQueries], last[kPagedMaxTileQueries];
  // Padded to whole vectors for the vector exp over queries (the padding lanes are never used).
  alignas(64) float alpha[kPagedMaxTileQueries];
  alignas(64) float m_run[kPagedMaxTileQueries];  // the running max
  alignas(64) float m_new[kPagedMaxTileQueries];
  for (int64_t i = 0; i < kPagedMaxTileQueries; ++i) m_run[i] = m_new[i] = -INFINITY;
  const float* q_of[kPagedMaxTileQueries];  // query i's row (no division per query and chunk)
  int64_t tile_first = t.key_end, tile_last = t.key_begin - 1;
  // The keys every query of the tile sees: chunks inside [all_first, all_last] need no masking
  // and form one value run (the same operations as the general path, fewer decisions).
  int64_t all_first = t.key_begin, all_last = t.key_end - 1;
  float* const o = t.o;
  float* const lane_sums = t.lane_sums;
  const int64_t stride = t.stride;
  for (int64_t i = 0; i < queries; ++i) {
    const int64_t row = i / t.num_heads;
    const int64_t position = t.first_position + row;
    const int64_t window_first = t.window > 0 ? position - t.window + 1 : 0;
    q_of[i] = t.q + row * t.q_row_stride + (i - row * t.num_heads) * d;
    first[i] = window_first > t.key_begin ? window_first : t.key_begin;
    last[i] = position < t.key_end - 1 ? position : t.key_end - 1;
    t.m[i] = -INFINITY;
    t.l[i] = 0.0f;
    for (int64_t e = 0; e < width; e += kLanes) S::Store(o + i * stride + e, S::Zero());
    for (int64_t j = 0; j < kChunk; j += kLanes) S::Store(lane_sums + i * kChunk + j, S::Zero());
    if (first[i] > all_first) all_first = first[i];
    if (last[i] < all_last) all_last = last[i];
    if (first[i] > last[i]) continue;
    if (first[i] < tile_first) tile_first = first[i];
    if (last[i] > tile_last) tile_last = last[i];
  }
  if (tile_first > tile_last) return;

  // Zeroed so that the lanes of keys no query of the tile sees hold numbers (they are dropped).
  alignas(64) float key_scales[kChunk] = {};
  alignas(64) float value_scales[kChunk] = {};
  for (int64_t chunk = tile_first / kChunk * kChunk; chunk <= tile_last; chunk += kChunk) {
    const int64_t chunk_last = chunk + kChunk - 1;
    WidenChunk<S, T>(kv, t, chunk, tile_first > chunk ? tile_first : chunk,
                     tile_last < chunk_last ? tile_last : chunk_last, key_scales, value_scales);
    const bool seen_by_all = all_first <= chunk && chunk_last <= all_last;
    if (chunk_last < tile_last) {
      PrefetchChunk<T>(kv, t, chunk_last + 1, tile_last < chunk_last + kChunk ? tile_last : chunk_last + kChunk);
    }
    // Three passes so that no query's exps wait on another's: scores and running max per query,
    // the rescale factors of all queries in one vector exp, then the weights per query.
    for (int64_t i = 0; i < queries; ++i) {
      m_new[i] = m_run[i];
      if (last[i] < chunk || first[i] > chunk_last) continue;
      const int64_t lo = (first[i] > chunk ? first[i] : chunk) - chunk;
      const int64_t hi = (last[i] < chunk_last ? last[i] : chunk_last) - chunk;
      float* scores = t.weights + i * kChunk;
      ChunkScores<S>(q_of[i], t.key_buf, stride, d, scores);
      Vec chunk_max = S::Set1(-INFINITY);
      for (int v = 0; v < kVecs; ++v) {
        Vec s = S::LoadF32(scores + v * kLanes);
        if constexpr (T == DType::kF8E4M3) s = S::Mul(s, S::LoadF32(key_scales + v * kLanes));
        s = S::Mul(s, S::Set1(t.scale));
        if (!seen_by_all) s = S::KeepLanes(s, lo - v * kLanes, hi - v * kLanes, -INFINITY);
        S::Store(scores + v * kLanes, s);
        chunk_max = S::Max(chunk_max, s);
      }
      // Branch-free (a new maximum is a coin flip the predictor loses): a NaN keeps m_new.
      const float reduced = S::ReduceMax(chunk_max);
      m_new[i] = reduced > m_new[i] ? reduced : m_new[i];
    }
    // alpha = e^(m - m'): 0 when m = -inf (-inf - finite = -inf), exactly 1 when the max stays;
    // queries that see none of this chunk get 1 and are not touched below.
    for (int64_t i = 0; i < queries; i += kLanes) {
      S::Store(alpha + i, S::Exp(S::Sub(S::LoadF32(m_run + i), S::LoadF32(m_new + i))));
    }
    for (int64_t i = 0; i < queries; ++i) {
      if (last[i] < chunk || first[i] > chunk_last) continue;
      const Vec a = S::Set1(alpha[i]);
      const Vec m_vec = S::Set1(m_new[i]);
      float* sums = lane_sums + i * kChunk;
      float* weights = t.weights + i * kChunk;
      for (int v = 0; v < kVecs; ++v) {
        Vec p = S::Exp(S::Sub(S::LoadF32(weights + v * kLanes), m_vec));  // unseen: -inf - m' = -inf, 0
        S::Store(sums + v * kLanes, S::Fma(S::LoadF32(sums + v * kLanes), a, p));
        if constexpr (T == DType::kF8E4M3) p = S::Mul(p, S::LoadF32(value_scales + v * kLanes));
        S::Store(weights + v * kLanes, p);
      }
      m_run[i] = m_new[i];
    }
    // Values: runs of consecutive queries that see the same keys of this chunk share a register
    // tile (all of the tile's queries away from the causal diagonal and the window's edge).
    if (seen_by_all) {
      ValueRun<S>(t, 0, queries, 0, kChunk - 1, alpha, width);
      continue;
    }
    for (int64_t i = 0; i < queries;) {
      if (last[i] < chunk || first[i] > chunk_last) {
        ++i;
        continue;
      }
      const int64_t lo = (first[i] > chunk ? first[i] : chunk) - chunk;
      const int64_t hi = (last[i] < chunk_last ? last[i] : chunk_last) - chunk;
      int64_t end = i + 1;
      while (end < queries && last[end] >= chunk && first[end] <= chunk_last &&
             (first[end] > chunk ? first[end] : chunk) - chunk == lo &&
             (last[end] < chunk_last ? last[end] : chunk_last) - chunk == hi) {
        ++end;
      }
      ValueRun<S>(t, i, end, lo, hi, alpha, width);
      i = end;
    }
  }
  for (int64_t i = 0; i < queries; ++i) {
    t.m[i] = m_run[i];
    if (m_run[i] == -INFINITY) continue;
    Vec sum = S::LoadF32(t.lane_sums + i * kChunk);
    for (int v = 1; v < kVecs; ++v) sum = S::Add(sum, S::LoadF32(t.lane_sums + i * kChunk + v * kLanes));
    t.l[i] = S::Sum(sum);
  }
}

template <class S>
void PagedAttentionTile(const PagedKvView& kv, const PagedTileTask& t) {
  switch (kv.dtype) {
    case DType::kF32: PagedAttentionTileTyped<S, DType::kF32>(kv, t); return;
    case DType::kF16: PagedAttentionTileTyped<S, DType::kF16>(kv, t); return;
    case DType::kBF16: PagedAttentionTileTyped<S, DType::kBF16>(kv, t); return;
    case DType::kF8E4M3: PagedAttentionTileTyped<S, DType::kF8E4M3>(kv, t); return;
    default: return;  // KvStore only creates the four types above
  }
}

// The variant's Exp over an array (KernelVariant::softmax_exp, for its accuracy test).
template <class S>
void SoftmaxExp(const float* x, int64_t count, float* out) {
  alignas(64) float buf[S::kLanes];
  for (int64_t i = 0; i < count; i += S::kLanes) {
    const int64_t n = count - i < S::kLanes ? count - i : S::kLanes;
    S::Store(buf, S::Exp(n == S::kLanes ? S::LoadF32(x + i) : S::LoadF32Tail(x + i, n)));
    for (int64_t l = 0; l < n; ++l) out[i + l] = buf[l];
  }
}

}  // namespace ember::kernels::cpu
