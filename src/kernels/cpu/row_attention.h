// RowAttention (kernels/row_attention.h) for the fast variants, templated on the SIMD struct of
// kernels/cpu/paged_attention_tile.h (S::kLanes, kValueVecs, Zero, Set1, Add, Sub, Mul, Max,
// Fma, LoadF32, LoadF32Tail, Store, Exp, KeepLanes, Sum, kScoreKeys, ReduceScores). Three passes
// over the keys:
//   scores  s_j = Sum(lane-wise q * k_j) * scale, their max;
//   weights p_j = Exp(s_j - max) a vector at a time (lanes past the last key held at -inf, so 0),
//           their sum lane-wise then Sum;
//   values  o = sum_j p_j v_j key by key in order, head_dim in strips of kValueVecs vectors held
//           in registers, then o * (1 / sum).
// No STL and no non-template inline helpers: this header is compiled with ISA flags.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/row_attention.h"

namespace ember::kernels::cpu {

// Lane-wise partial sums of q . k: lane l holds the products of dimensions l, l + kLanes, ...
template <class S>
typename S::Vec RowDotLanes(const float* q, const float* k, int64_t d) {
  constexpr int64_t kLanes = S::kLanes;
  const int64_t full = d / kLanes * kLanes;
  typename S::Vec acc = S::Zero();
  for (int64_t i = 0; i < full; i += kLanes) acc = S::Fma(S::LoadF32(q + i), S::LoadF32(k + i), acc);
  if (full < d) acc = S::Fma(S::LoadF32Tail(q + full, d - full), S::LoadF32Tail(k + full, d - full), acc);
  return acc;
}

// out[0, n) = x (n <= kLanes) through an aligned buffer: S::Store wants 64-byte alignment.
template <class S>
void StoreFirst(float* out, typename S::Vec x, int64_t n) {
  alignas(64) float buf[S::kLanes];
  S::Store(buf, x);
  for (int64_t l = 0; l < n; ++l) out[l] = buf[l];
}

template <class S>
void RowAttention(const float* q, int64_t d, float scale, const KeyValueRows* runs, int64_t num_runs, float* scores,
                  float* out) {
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
      for (int64_t g = 0; g < S::kScoreKeys; ++g) acc[g] = RowDotLanes<S>(q, run.keys + (j + g) * run.stride, d);
      S::ReduceScores(acc, group);
      for (int64_t g = 0; g < S::kScoreKeys; ++g, ++n) {
        scores[n] = group[g] * scale;
        max_score = scores[n] > max_score ? scores[n] : max_score;
      }
    }
    for (; j < run.count; ++j, ++n) {
      scores[n] = S::Sum(RowDotLanes<S>(q, run.keys + j * run.stride, d)) * scale;
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
  const Vec inv = S::Set1(1.0f / S::Sum(lane_sums));
  constexpr int64_t kStrip = S::kValueVecs * kLanes;
  for (int64_t c = 0; c < d; c += kStrip) {
    const int64_t width = d - c < kStrip ? d - c : kStrip;
    const int64_t vecs = (width + kLanes - 1) / kLanes;
    Vec acc[S::kValueVecs];
    for (int64_t x = 0; x < S::kValueVecs; ++x) acc[x] = S::Zero();
    int64_t key = 0;
    for (int64_t r = 0; r < num_runs; ++r) {
      const KeyValueRows& run = runs[r];
      for (int64_t j = 0; j < run.count; ++j, ++key) {
        const Vec p = S::Set1(scores[key]);
        const float* v = run.values + j * run.stride + c;
        if (width == kStrip) {
          for (int64_t x = 0; x < S::kValueVecs; ++x) acc[x] = S::Fma(p, S::LoadF32(v + x * kLanes), acc[x]);
        } else {
          for (int64_t x = 0; x < vecs; ++x) {
            const int64_t lanes = width - x * kLanes < kLanes ? width - x * kLanes : kLanes;
            acc[x] = S::Fma(p, lanes == kLanes ? S::LoadF32(v + x * kLanes) : S::LoadF32Tail(v + x * kLanes, lanes),
                            acc[x]);
          }
        }
      }
    }
    for (int64_t x = 0; x < vecs; ++x) {
      const int64_t lanes = width - x * kLanes < kLanes ? width - x * kLanes : kLanes;
      StoreFirst<S>(out + c + x * kLanes, S::Mul(acc[x], inv), lanes);
    }
  }
}

}  // namespace ember::kernels::cpu
