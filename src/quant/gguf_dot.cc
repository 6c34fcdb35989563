#include "quant/gguf_dot.h"

#include <cstring>

#include "core/check.h"
#include "core/dtypes.h"
#include "quant/gguf_blocks.h"
#include "quant/gguf_dequant.h"
#include "quant/gguf_dot_variants.h"
#include "quant/gguf_quantize_simd.h"
#include "quant/gguf_type_entries.h"

namespace ember::quant {
namespace {

// The kernel row of `weight_type`'s activation format; a type without one is the caller's bug.
const GgufTypeKernels& ActivationKernels(GgmlType weight_type) {
  const std::optional<GgmlType> format = ActivationFormatFor(weight_type);
  EMBER_CHECK(format.has_value(), "no activation format for GGML type {}", static_cast<uint32_t>(weight_type));
  return *FindGgufKernels(*format);
}

}  // namespace

// generic is the reference's code (gguf_dot_ref.cc says why); amx runs the avx512 row dots (its tile
// GEMMs are the packed forms', gguf_packed.h).
constinit const IsaTable<DotVariant> kDotVariants("quant::DotVariant",
                                                  {&kDotRef, &kDotRef, &kDotAvx2, &kDotAvx512, &kDotAvx512});

std::optional<GgmlType> ActivationFormatFor(GgmlType weight_type) {
  const GgufTypeKernels* kernels = FindGgufKernels(weight_type);
  return kernels != nullptr ? kernels->activation : std::nullopt;
}

int64_t ActivationRowBytes(GgmlType weight_type, int64_t n) {
  const GgufTypeKernels& format = ActivationKernels(weight_type);
  const GgmlTypeTraits& geometry = *FindGgmlType(format.type);
  EMBER_CHECK(n % geometry.block_elements == 0, "{} elements is not a whole number of {} blocks", n, geometry.name);
  return format.activation_row_bytes(n);
}

void QuantizeActivationRow(GgmlType weight_type, const float* x, int64_t n, void* out) {
  ActivationKernels(weight_type).quantize_activation(x, n, out);
}

void QuantizeActivationQ8_0(const float* x, int64_t n, BlockQ8_0* blocks, uint8_t* sums) {
  QuantizeRowQ8_0(x, n, blocks);
  for (int64_t i = 0; i < n / kQK; ++i) {
    int32_t total = 0;
    for (int j = 0; j < kQK; ++j) total += blocks[i].qs[j];
    Q8_0BlockSum sum;
    sum.d = F16ToF32(blocks[i].d);
    sum.d_sum = sum.d * static_cast<float>(total);
    std::memcpy(sums + i * static_cast<int64_t>(sizeof(sum)), &sum, sizeof(sum));
  }
}

namespace entries {

void QuantizeActivationF32(const float* x, int64_t n, void* out) {
  if (n > 0) std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
}

// The AVX-512 and AVX2 quantizers are bit-exact with the scalar ones (gguf_quantize_simd.h), so
// they are used whenever the host has them, whatever the active dot variant: every variant sees
// the same activation bits.
void QuantizeActivationQ8_0(const float* x, int64_t n, void* out) {
  EMBER_CHECK(n % kQK == 0, "Q8_0 activations need a multiple of 32 elements, got {}", n);
  auto* blocks = static_cast<BlockQ8_0*>(out);
  // Written bytewise: the kernels read them with memcpy too, at any alignment of `out`.
  auto* sums = static_cast<uint8_t*>(out) + Q8_0BlockSumsOffset(n / kQK);
  static const bool avx512 = IsaSupported(Isa::kAvx512);
  static const bool avx2 = IsaSupported(Isa::kAvx2);
  if (avx512) {
    QuantizeActivationQ8_0Avx512(x, n, blocks, sums);
  } else if (avx2) {
    QuantizeActivationQ8_0Avx2(x, n, blocks, sums);
  } else {
    quant::QuantizeActivationQ8_0(x, n, blocks, sums);
  }
}

void QuantizeActivationQ8_K(const float* x, int64_t n, void* out) {
  EMBER_CHECK(n % kQKK == 0, "Q8_K activations need a multiple of 256 elements, got {}", n);
  static const bool avx512 = IsaSupported(Isa::kAvx512);
  static const bool avx2 = IsaSupported(Isa::kAvx2);
  if (avx512) {
    QuantizeRowQ8_KAvx512(x, n, static_cast<BlockQ8_K*>(out));
  } else if (avx2) {
    QuantizeRowQ8_KAvx2(x, n, static_cast<BlockQ8_K*>(out));
  } else {
    QuantizeRowQ8_K(x, n, static_cast<BlockQ8_K*>(out));
  }
}

int64_t ActivationRowBytesF32(int64_t n) { return n * static_cast<int64_t>(sizeof(float)); }

int64_t ActivationRowBytesQ8_0(int64_t n) {
  const int64_t blocks = n / kQK;
  return Q8_0BlockSumsOffset(blocks) + blocks * static_cast<int64_t>(sizeof(Q8_0BlockSum));
}

int64_t ActivationRowBytesQ8_K(int64_t n) { return n / kQKK * static_cast<int64_t>(sizeof(BlockQ8_K)); }

}  // namespace entries
}  // namespace ember::quant
