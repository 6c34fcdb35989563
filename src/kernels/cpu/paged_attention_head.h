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
// output accumulates key by key. Nothing depends on the batch, the chunking or the thread count.
// No STL and no non-template inline helpers here: this header is compiled with ISA flags
// (see kernels/README.md, "Adding a variant").
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/paged_attention.h"

namespace ember::kernels::cpu {

template <DType T>
constexpr int64_t kPagedElementBytes = T == DType::kF32 ? 4 : (T == DType::kF8E4M3 ? 1 : 2);

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
  const int64_t count = t.last_key - t.first_key + 1;

  float max_score = -INFINITY;
  for (int64_t j = 0; j < count; ++j) {
    const int64_t position = t.first_key + j;
    const int64_t slot = int64_t{t.block_row[position / kv.block_size]} * kv.block_size + position % kv.block_size;
    const int64_t row = slot * kv.num_kv_heads + t.kv_head;
    const uint8_t* k = keys + row * d * kBytes;
    Vec acc = S::Zero();
    for (int64_t i = 0; i < full; i += kLanes) acc = S::Fma(S::LoadF32(t.q + i), S::template Load<T>(k + i * kBytes), acc);
    if (tail > 0) {
      acc = S::Fma(S::LoadF32Tail(t.q + full, tail), S::template LoadTail<T>(k + full * kBytes, tail), acc);
    }
    float dot = S::Sum(acc);
    if constexpr (T == DType::kF8E4M3) dot *= kv.key_scales[row];
    const float score = dot * t.scale;
    t.scores[j] = score;
    if (score > max_score) max_score = score;
  }
  float total = 0.0f;
  for (int64_t j = 0; j < count; ++j) {
    t.scores[j] = expf(t.scores[j] - max_score);
    total += t.scores[j];
  }
  const float inv_total = 1.0f / total;
  for (int64_t i = 0; i < d; ++i) t.out[i] = 0.0f;
  for (int64_t j = 0; j < count; ++j) {
    const int64_t position = t.first_key + j;
    const int64_t slot = int64_t{t.block_row[position / kv.block_size]} * kv.block_size + position % kv.block_size;
    const int64_t row = slot * kv.num_kv_heads + t.kv_head;
    const uint8_t* v = values + row * d * kBytes;
    float p = t.scores[j] * inv_total;
    if constexpr (T == DType::kF8E4M3) p *= kv.value_scales[row];
    const Vec pv = S::Set1(p);
    for (int64_t i = 0; i < full; i += kLanes) {
      S::Store(t.out + i, S::Fma(pv, S::template Load<T>(v + i * kBytes), S::LoadF32(t.out + i)));
    }
    if (tail > 0) {
      S::StoreTail(t.out + full,
                   S::Fma(pv, S::template LoadTail<T>(v + full * kBytes, tail), S::LoadF32Tail(t.out + full, tail)),
                   tail);
    }
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
