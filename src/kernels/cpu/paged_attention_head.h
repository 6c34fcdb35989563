// The paged-attention loop shared by the fast variants (generic, avx2, avx512), templated on a
// SIMD struct S each variant defines in its unnamed namespace:
//
//   using Vec; static constexpr int kLanes;
//   Vec Zero(); Vec Set1(float); Vec Fma(Vec a, Vec b, Vec c)  // a * b + c
//   Vec LoadF32(const float*); Vec LoadF32Tail(const float*, int64_t n)   // n < kLanes, rest 0
//   void Store(float*, Vec); void StoreTail(float*, Vec, int64_t n)
//   template <DType T> Vec Load(const uint8_t*); template <DType T> Vec LoadTail(const uint8_t*, int64_t n)
//       kLanes stored elements of type T widened to f32 (fp8: the e4m3 value, unscaled)
//   float Sum(Vec)  // fixed reduction tree
//
// Determinism contract: per (query, head) one vector accumulator walks head_dim in kLanes steps
// (then the masked tail) for each key, keys in position order, softmax in position order; the
// output accumulates key by key. How many keys share a loop iteration does not matter: each has
// its own accumulator. Nothing depends on the batch, the chunking or the thread count.
// No STL and no non-template inline helpers here: this header is compiled with ISA flags
// (see kernels/README.md, "Adding a variant").
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/paged_attention.h"

namespace ember::kernels::cpu {

template <DType T>
constexpr int64_t kPagedElementBytes = T == DType::kF32 ? 4 : (T == DType::kF8E4M3 ? 1 : 2);

// Output vectors accumulated in registers at once by the value loop (8 zmm = 128 dims).
inline constexpr int kValueChunk = 8;

// Calls fn(first cache row, number of keys) for each run of the task's keys that lies in one
// cache block, in position order: one block-table lookup per block, no division per key. Key i of
// a run is cache row `first + i * kv.num_kv_heads`.
template <class Fn>
void ForEachKeyRun(const PagedKvView& kv, const PagedHeadTask& t, Fn&& fn) {
  for (int64_t position = t.first_key; position <= t.last_key;) {
    const int64_t offset = position % kv.block_size;
    const int64_t left = kv.block_size - offset;
    const int64_t n = left < t.last_key - position + 1 ? left : t.last_key - position + 1;
    fn((int64_t{t.block_row[position / kv.block_size]} * kv.block_size + offset) * kv.num_kv_heads + t.kv_head, n);
    position += n;
  }
}

// Calls fn(cache row, key index from 0) for the task's keys in position order.
template <class Fn>
void ForEachKey(const PagedKvView& kv, const PagedHeadTask& t, Fn&& fn) {
  int64_t key = 0;
  ForEachKeyRun(kv, t, [&](int64_t row0, int64_t n) {
    for (int64_t i = 0; i < n; ++i) fn(row0 + i * kv.num_kv_heads, key++);
  });
}

template <class S, DType T>
void PagedAttentionHeadTyped(const PagedKvView& kv, const PagedHeadTask& t) {
  using Vec = typename S::Vec;
  constexpr int64_t kLanes = S::kLanes;
  constexpr int64_t kBytes = kPagedElementBytes<T>;
  const int64_t d = kv.head_dim;
  const int64_t full = d / kLanes * kLanes;
  const int64_t tail = d - full;
  const auto* keys = static_cast<const uint8_t*>(kv.keys);
  const auto* values = static_cast<const uint8_t*>(kv.values);

  // Keys are walked run by run within a block and four at a time with independent accumulators: each key's dot product is still the same operation
  // sequence, so this changes speed, not results.
  float max_score = -INFINITY;
  int64_t j = 0;
  const int64_t row_step = kv.num_kv_heads;
  ForEachKeyRun(kv, t, [&](int64_t row0, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      const uint8_t* k0 = keys + (row0 + i * row_step) * d * kBytes;
      const uint8_t* k1 = k0 + row_step * d * kBytes;
      const uint8_t* k2 = k1 + row_step * d * kBytes;
      const uint8_t* k3 = k2 + row_step * d * kBytes;
      Vec a0 = S::Zero(), a1 = S::Zero(), a2 = S::Zero(), a3 = S::Zero();
      for (int64_t e = 0; e < full; e += kLanes) {
        const Vec qv = S::LoadF32(t.q + e);
        a0 = S::Fma(qv, S::template Load<T>(k0 + e * kBytes), a0);
        a1 = S::Fma(qv, S::template Load<T>(k1 + e * kBytes), a1);
        a2 = S::Fma(qv, S::template Load<T>(k2 + e * kBytes), a2);
        a3 = S::Fma(qv, S::template Load<T>(k3 + e * kBytes), a3);
      }
      if (tail > 0) {
        const Vec qv = S::LoadF32Tail(t.q + full, tail);
        a0 = S::Fma(qv, S::template LoadTail<T>(k0 + full * kBytes, tail), a0);
        a1 = S::Fma(qv, S::template LoadTail<T>(k1 + full * kBytes, tail), a1);
        a2 = S::Fma(qv, S::template LoadTail<T>(k2 + full * kBytes, tail), a2);
        a3 = S::Fma(qv, S::template LoadTail<T>(k3 + full * kBytes, tail), a3);
      }
      float dots[4] = {S::Sum(a0), S::Sum(a1), S::Sum(a2), S::Sum(a3)};
      for (int u = 0; u < 4; ++u) {
        if constexpr (T == DType::kF8E4M3) dots[u] *= kv.key_scales[row0 + (i + u) * row_step];
        const float score = dots[u] * t.scale;
        t.scores[j++] = score;
        if (score > max_score) max_score = score;
      }
    }
    for (; i < n; ++i) {
      const uint8_t* k = keys + (row0 + i * row_step) * d * kBytes;
      Vec acc = S::Zero();
      for (int64_t e = 0; e < full; e += kLanes) acc = S::Fma(S::LoadF32(t.q + e), S::template Load<T>(k + e * kBytes), acc);
      if (tail > 0) {
        acc = S::Fma(S::LoadF32Tail(t.q + full, tail), S::template LoadTail<T>(k + full * kBytes, tail), acc);
      }
      float dot = S::Sum(acc);
      if constexpr (T == DType::kF8E4M3) dot *= kv.key_scales[row0 + i * row_step];
      const float score = dot * t.scale;
      t.scores[j++] = score;
      if (score > max_score) max_score = score;
    }
  });
  const int64_t count = j;
  float total = 0.0f;
  for (j = 0; j < count; ++j) {
    t.scores[j] = expf(t.scores[j] - max_score);
    total += t.scores[j];
  }
  const float inv_total = 1.0f / total;
  // The softmax weights (times the fp8 value scale) replace the scores, in key order.
  ForEachKey(kv, t, [&](int64_t row, int64_t key) {
    float p = t.scores[key] * inv_total;
    if constexpr (T == DType::kF8E4M3) p *= kv.value_scales[row];
    t.scores[key] = p;
  });
  // out[e] = sum over keys of p * v[e], accumulated key by key from 0 in position order. The
  // output is walked in chunks of kValueChunk vectors kept in registers across all keys (a
  // key-outer loop through memory stalled on store forwarding: ~55% of the head's time); each
  // element still sees the same FMA sequence, so the bits do not change.
  int64_t e0 = 0;
  for (; e0 + kValueChunk * kLanes <= full; e0 += kValueChunk * kLanes) {
    Vec acc[kValueChunk];
    for (int c = 0; c < kValueChunk; ++c) acc[c] = S::Zero();
    ForEachKey(kv, t, [&](int64_t row, int64_t key) {
      const uint8_t* v = values + (row * d + e0) * kBytes;
      const Vec pv = S::Set1(t.scores[key]);
      for (int c = 0; c < kValueChunk; ++c) acc[c] = S::Fma(pv, S::template Load<T>(v + c * kLanes * kBytes), acc[c]);
    });
    for (int c = 0; c < kValueChunk; ++c) S::Store(t.out + e0 + c * kLanes, acc[c]);
  }
  for (; e0 < full; e0 += kLanes) {
    Vec acc = S::Zero();
    ForEachKey(kv, t, [&](int64_t row, int64_t key) {
      acc = S::Fma(S::Set1(t.scores[key]), S::template Load<T>(values + (row * d + e0) * kBytes), acc);
    });
    S::Store(t.out + e0, acc);
  }
  if (tail > 0) {
    Vec acc = S::Zero();
    ForEachKey(kv, t, [&](int64_t row, int64_t key) {
      acc = S::Fma(S::Set1(t.scores[key]), S::template LoadTail<T>(values + (row * d + full) * kBytes, tail), acc);
    });
    S::StoreTail(t.out + full, acc, tail);
  }
}

template <class S>
void PagedAttentionHead(const PagedKvView& kv, const PagedHeadTask& t) {
  switch (kv.dtype) {
    case DType::kF32: PagedAttentionHeadTyped<S, DType::kF32>(kv, t); return;
    case DType::kF16: PagedAttentionHeadTyped<S, DType::kF16>(kv, t); return;
    case DType::kBF16: PagedAttentionHeadTyped<S, DType::kBF16>(kv, t); return;
    case DType::kF8E4M3: PagedAttentionHeadTyped<S, DType::kF8E4M3>(kv, t); return;
    default: return;  // KvStore only creates the four types above
  }
}

}  // namespace ember::kernels::cpu
