// Dot products of GGUF-quantized weight rows with quantized activation rows.
//
// Dequantizing a weight row to f32 and multiplying would cost more per element than streaming
// the few bits of it from memory. So, as llama.cpp does, the f32 activation row is quantized
// once to 8-bit blocks aligned with the weight's blocks, and each block pair is reduced with
// integer multiply-adds; the f32 scales are applied once per block (or per K-quant sub-block
// in integer arithmetic, then once per super-block):
//
//   weight type                      activation format
//   Q4_0 Q4_1 Q5_0 Q5_1 Q8_0         Q8_0  (32-element blocks, f16 scale)
//   Q4_K Q5_K Q6_K                   Q8_K  (256-element blocks, f32 scale, 16-element sums)
//   F32 F16 BF16                     F32   (no quantization; plain f32 dot, not a fast path)
//
// Q8_0 activation rows also carry, after the n / 32 blocks (padded to a multiple of 8 bytes),
// one Q8_0BlockSum per block: the block's scale as f32 and scale * sum(q). The SIMD kernels read
// those instead of converting the f16 scale and summing the quants again for every weight row:
// the Q4_0/Q5_0 offsets (q - 8, q - 16) and the Q4_1/Q5_1 minimums multiply sum(q) only. The
// leading blocks are an ordinary Q8_0 row (DequantizeRow reads them as such).
//
// The result equals the f32 dot of the dequantized weight row with the dequantized activation
// row up to f32 rounding (the integer block sums are exact), so the only approximation is the
// activation rounding: per element at most half a quantization step, d / 2 with d the block's
// amax / 127, plus for Q8_0 the f16 rounding of d (|q| * 2^-11 * d <= 0.062 d).
//
// Variants, one per ISA level of core/isa.h (which picks the active one for every kernel family):
// "ref" (scalar), "generic" (the same portable code; the integer loops are already what a
// compiler vectorises), "avx2" (AVX2 + FMA + F16C: pmaddubsw / pmaddwd) and "avx512" (AVX-512
// BW/VL + VNNI: vpdpbusd / vpdpwssd).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>

#include "core/isa.h"
#include "formats/ggml_type.h"

namespace ember::quant {

// sum_i w[i] * x[i] over `n` elements: `weight_row` is a row of the weight type, `activation_row`
// the same n elements converted by QuantizeActivationRow for that weight type. n must be a
// multiple of the weight's block size.
using VecDotFn = float (*)(int64_t n, const void* weight_row, const void* activation_row);

// One weight row against `rows` (1 .. kMaxDotRows) activation rows at activation_rows + r *
// activation_stride bytes: out[r] is bit for bit the VecDotFn of row r, with the weight's blocks
// decoded once for all rows (prefill reuses each weight block across tokens).
using VecDotRowsFn = void (*)(int64_t n, const void* weight_row, const void* activation_rows,
                              int64_t activation_stride, int rows, float* out);
constexpr int kMaxDotRows = 4;

struct Q8_0BlockSum {
  float d;      // F16ToF32 of the block's scale
  float d_sum;  // d * sum of the block's 32 quants (one f32 rounding)
};

// Byte offset of the Q8_0BlockSum array in a Q8_0 activation row of `blocks` blocks.
constexpr int64_t Q8_0BlockSumsOffset(int64_t blocks) { return (blocks * 34 + 7) / 8 * 8; }

// The activation format for a weight type (Q8_0, Q8_K or F32), or nullopt if there is no dot
// product for it (Q2_K, Q3_K, integer types, ...).
std::optional<GgmlType> ActivationFormatFor(GgmlType weight_type);

// Bytes of an activation row of `n` elements converted for `weight_type` (which must have a
// format, and n a multiple of the weight's block size), Q8_0BlockSums included; a multiple of 4
// (of 8 for Q8_0), so rows packed back to back stay aligned.
int64_t ActivationRowBytes(GgmlType weight_type, int64_t n);

// Converts x[0, n) to ActivationFormatFor(weight_type) in `out` (ActivationRowBytes bytes,
// 4-byte aligned). Every variant sees these same activation bits (the AVX-512 quantizer used
// when the host has it is bit-exact with the scalar one, gguf_quantize_simd.h), so variants
// differ only in the order of their f32 additions.
void QuantizeActivationRow(GgmlType weight_type, const float* x, int64_t n, void* out);

// One ISA variant: its dot products, indexed by GGML type code; null where it has none. Every
// variant has a dot for every type whose traits row names an activation format (checked by
// tests/unit/quant/weight_traits_test.cc), so callers that checked ActivationFormatFor once per
// tensor never find a hole after switching variants.
struct DotVariant {
  // One type's kernels, as a variant file lists them.
  struct Entry {
    GgmlType type;
    VecDotFn one;
    // The multi-row form where the variant has one (null: callers loop the one-row dot).
    VecDotRowsFn rows = nullptr;
  };
  constexpr DotVariant(std::initializer_list<Entry> entries) {
    for (const Entry& e : entries) {
      one_[static_cast<uint32_t>(e.type)] = e.one;
      rows_[static_cast<uint32_t>(e.type)] = e.rows;
    }
  }

  // The dot product for `weight_type`, or null.
  VecDotFn For(GgmlType weight_type) const {
    const auto code = static_cast<uint32_t>(weight_type);
    return code < kGgmlTypeCodeLimit ? one_[code] : nullptr;
  }
  // Its multi-row form, or null.
  VecDotRowsFn RowsFor(GgmlType weight_type) const {
    const auto code = static_cast<uint32_t>(weight_type);
    return code < kGgmlTypeCodeLimit ? rows_[code] : nullptr;
  }

 private:
  std::array<VecDotFn, kGgmlTypeCodeLimit> one_{};
  std::array<VecDotRowsFn, kGgmlTypeCodeLimit> rows_{};
};

// The variants per ISA level (gguf_dot_variants.h), registered with core/isa.h.
extern const IsaTable<DotVariant> kDotVariants;
// The variant of the active level.
inline const DotVariant& ActiveDotVariant() { return kDotVariants.Active(); }

}  // namespace ember::quant
