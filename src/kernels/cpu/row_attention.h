// RowAttention (kernels/row_attention.h) for the fast variants, templated on the SIMD struct of
// kernels/cpu/paged_attention_tile.h (S::kLanes, kValueRows, kValueVecs, Zero, Set1, Add, Sub,
// Mul, Max, Fma, LoadF32, LoadF32Tail, Store, Exp, KeepLanes, Sum, kScoreKeys, ReduceScores).
// Three passes over the keys, per query:
//   scores  s_j = Sum(lane-wise q * k_j) * scale, their max;
//   weights p_j = Exp(s_j - max) a vector at a time (lanes past the last key held at -inf, so 0),
//           their sum lane-wise then Sum;
//   values  o = sum_j p_j v_j key by key in order, head_dim in strips of kValueVecs vectors held
//           in registers, then o * (1 / sum).
// Queries over the same keys share the value pass: kValueRows queries' accumulators at once, each
// value vector loaded once for all of them. That is where one query alone waits on its FMA chains
// (one FMA per key per accumulator); the rows' chains are independent, and each keeps the sequence
// it has alone, so a query's bits do not depend on its group.
// No STL and no non-template inline helpers: this header is compiled with ISA flags.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/row_attention.h"

namespace ember::kernels::cpu {

// Scores of kKeys keys at once, acc[g] = lane-wise partial sums of q . k_g: lane l holds the
// products of dimensions l, l + kLanes, ... added in that order. The keys' chains are interleaved
// (each q vector loaded once for all of them), so the FMA latency of one chain hides behind the
// others; each key's own sequence is the same as if it were alone.
template <class S, int kKeys>
void DotLanes(const float* q, const float* k, int64_t stride, int64_t d, typename S::Vec* acc) {
  constexpr int64_t kLanes = S::kLanes;
  const int64_t full = d / kLanes * kLanes;
  for (int g = 0; g < kKeys; ++g) acc[g] = S::Zero();
  for (int64_t i = 0; i < full; i += kLanes) {
    const typename S::Vec qi = S::LoadF32(q + i);
    for (int g = 0; g < kKeys; ++g) acc[g] = S::Fma(qi, S::LoadF32(k + g * stride + i), acc[g]);
  }
  if (full < d) {
    const typename S::Vec qt = S::LoadF32Tail(q + full, d - full);
    for (int g = 0; g < kKeys; ++g) acc[g] = S::Fma(qt, S::LoadF32Tail(k + g * stride + full, d - full), acc[g]);
  }
}

// out[0, n) = x (n <= kLanes) through an aligned buffer: S::Store wants 64-byte alignment.
template <class S>
void StoreFirst(float* out, typename S::Vec x, int64_t n) {
  alignas(64) float buf[S::kLanes];
  S::Store(buf, x);
  for (int64_t l = 0; l < n; ++l) out[l] = buf[l];
}

// o_r[c, c + kStrip) = sum_j p_rj v_j[c, c + kStrip) key by key in order, times inv_r, for kRows
// queries r: whole strips of kValueVecs vectors, the accumulators held in registers (a fixed count
// the compiler keeps there, where a runtime count spilled them to the stack on every key). p_r is
// at p + r * p_stride, o_r at out + r * out_stride.
template <class S, int kRows>
void ValueStrip(const KeyValueRows* runs, int64_t num_runs, const float* p, int64_t p_stride, int64_t c,
                const typename S::Vec* inv, float* out, int64_t out_stride) {
  using Vec = typename S::Vec;
  constexpr int64_t kLanes = S::kLanes;
  Vec acc[kRows][S::kValueVecs];
  for (int r = 0; r < kRows; ++r) {
    for (int x = 0; x < S::kValueVecs; ++x) acc[r][x] = S::Zero();
  }
  int64_t key = 0;
  for (int64_t run_index = 0; run_index < num_runs; ++run_index) {
    const KeyValueRows& run = runs[run_index];
    if (run.count == 0) continue;  // its rows may be null
    const float* v = run.values + c;
    for (int64_t j = 0; j < run.count; ++j, ++key, v += run.stride) {
      Vec values[S::kValueVecs];
      for (int x = 0; x < S::kValueVecs; ++x) values[x] = S::LoadF32(v + x * kLanes);
      for (int r = 0; r < kRows; ++r) {
        const Vec w = S::Set1(p[r * p_stride + key]);
        for (int x = 0; x < S::kValueVecs; ++x) acc[r][x] = S::Fma(w, values[x], acc[r][x]);
      }
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int x = 0; x < S::kValueVecs; ++x) {
      StoreFirst<S>(out + r * out_stride + c + x * kLanes, S::Mul(acc[r][x], inv[r]), kLanes);
    }
  }
}

// ValueStrip for `rows` <= kValueRows queries: the tile of that many rows.
template <class S, int kRows = S::kValueRows>
void ValueStripRows(int rows, const KeyValueRows* runs, int64_t num_runs, const float* p, int64_t p_stride,
                    int64_t c, const typename S::Vec* inv, float* out, int64_t out_stride) {
  if constexpr (kRows > 1) {
    if (rows < kRows) {
      ValueStripRows<S, kRows - 1>(rows, runs, num_runs, p, p_stride, c, inv, out, out_stride);
      return;
    }
  }
  ValueStrip<S, kRows>(runs, num_runs, p, p_stride, c, inv, out, out_stride);
}

// The same for the last `width` < kStrip columns (head_dim not a whole number of strips).
template <class S>
void ValuePartialStrip(const KeyValueRows* runs, int64_t num_runs, const float* p, int64_t c, int64_t width,
                       typename S::Vec inv, float* out) {
  using Vec = typename S::Vec;
  constexpr int64_t kLanes = S::kLanes;
  const int64_t vecs = (width + kLanes - 1) / kLanes;
  Vec acc[S::kValueVecs];
  for (int64_t x = 0; x < S::kValueVecs; ++x) acc[x] = S::Zero();
  int64_t key = 0;
  for (int64_t r = 0; r < num_runs; ++r) {
    const KeyValueRows& run = runs[r];
    for (int64_t j = 0; j < run.count; ++j, ++key) {
      const Vec w = S::Set1(p[key]);
      const float* v = run.values + j * run.stride + c;
      for (int64_t x = 0; x < vecs; ++x) {
        const int64_t lanes = width - x * kLanes < kLanes ? width - x * kLanes : kLanes;
        acc[x] = S::Fma(w, lanes == kLanes ? S::LoadF32(v + x * kLanes) : S::LoadF32Tail(v + x * kLanes, lanes), acc[x]);
      }
    }
  }
  for (int64_t x = 0; x < vecs; ++x) {
    const int64_t lanes = width - x * kLanes < kLanes ? width - x * kLanes : kLanes;
    StoreFirst<S>(out + c + x * kLanes, S::Mul(acc[x], inv), lanes);
  }
}

// Passes 1 and 2 of one query: scores[0, n) = the softmax numerators p_j over the keys of `runs`
// in order; returns 1 / sum_j p_j in every lane.
template <class S>
typename S::Vec SoftmaxWeights(const float* q, int64_t d, float scale, const KeyValueRows* runs, int64_t num_runs,
                               float* scores) {
  using Vec = typename S::Vec;
  constexpr int64_t kLanes = S::kLanes;
  int64_t n = 0;
  float max_score = -INFINITY;
  // Scores kScoreKeys keys at a time, reduced together (ReduceScores gives each key the bits
  // Sum gives it alone, so a key's score does not depend on its group).
  alignas(64) float group[S::kScoreKeys];
  for (int64_t r = 0; r < num_runs; ++r) {
    const KeyValueRows& run = runs[r];
    int64_t j = 0;
    for (; j + S::kScoreKeys <= run.count; j += S::kScoreKeys) {
      Vec acc[S::kScoreKeys];
      DotLanes<S, S::kScoreKeys>(q, run.keys + j * run.stride, run.stride, d, acc);
      S::ReduceScores(acc, group);
      for (int64_t g = 0; g < S::kScoreKeys; ++g, ++n) {
        scores[n] = group[g] * scale;
        max_score = scores[n] > max_score ? scores[n] : max_score;
      }
    }
    for (; j < run.count; ++j, ++n) {
      Vec acc;
      DotLanes<S, 1>(q, run.keys + j * run.stride, run.stride, d, &acc);
      scores[n] = S::Sum(acc) * scale;
      max_score = scores[n] > max_score ? scores[n] : max_score;
    }
  }
  const Vec max = S::Set1(max_score);
  Vec lane_sums = S::Zero();
  for (int64_t i = 0; i < n; i += kLanes) {
    const int64_t m = n - i < kLanes ? n - i : kLanes;
    const Vec s = m == kLanes ? S::LoadF32(scores + i) : S::KeepLanes(S::LoadF32Tail(scores + i, m), 0, m - 1, -INFINITY);
    const Vec p = S::Exp(S::Sub(s, max));
    lane_sums = S::Add(lane_sums, p);
    StoreFirst<S>(scores + i, p, m);
  }
  return S::Set1(1.0f / S::Sum(lane_sums));
}

template <class S>
void RowAttention(const float* q, int64_t q_stride, int64_t num_queries, int64_t d, float scale,
                  const KeyValueRows* runs, int64_t num_runs, float* scores, float* out, int64_t out_stride) {
  using Vec = typename S::Vec;
  int64_t num_keys = 0;
  for (int64_t r = 0; r < num_runs; ++r) num_keys += runs[r].count;
  const int64_t scores_stride = RowAttentionScratch(num_keys);
  constexpr int64_t kStrip = S::kValueVecs * S::kLanes;
  const int64_t whole = d / kStrip * kStrip;
  for (int64_t first = 0; first < num_queries; first += S::kValueRows) {
    const int rows = static_cast<int>(num_queries - first < S::kValueRows ? num_queries - first : S::kValueRows);
    Vec inv[S::kValueRows];
    for (int r = 0; r < rows; ++r) {
      inv[r] = SoftmaxWeights<S>(q + (first + r) * q_stride, d, scale, runs, num_runs,
                                 scores + (first + r) * scores_stride);
    }
    for (int64_t c = 0; c < whole; c += kStrip) {
      ValueStripRows<S>(rows, runs, num_runs, scores + first * scores_stride, scores_stride, c, inv,
                        out + first * out_stride, out_stride);
    }
    if (whole < d) {
      for (int r = 0; r < rows; ++r) {
        ValuePartialStrip<S>(runs, num_runs, scores + (first + r) * scores_stride, whole, d - whole, inv[r],
                             out + (first + r) * out_stride);
      }
    }
  }
}

}  // namespace ember::kernels::cpu
