#include "quant/gguf_dot.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/dtypes.h"
#include "quant/gguf_blocks.h"
#include "quant/gguf_dequant.h"
#include "quant/gguf_dot_variants.h"
#include "quant/gguf_quantize_simd.h"

namespace ember::quant {
namespace {

std::atomic<const DotVariant*> g_active{nullptr};

const DotVariant* FindVariant(std::string_view name) {
  for (const DotVariant* v : AvailableDotVariants()) {
    if (v->name == name) return v;
  }
  return nullptr;
}

// A variant is offered only if it has every dot product the reference has: callers check
// ActivationFormatFor once per tensor and must not find a hole after switching variants.
bool Complete(const DotVariant& v) {
  return v.f32 && v.f16 && v.bf16 && v.q4_0 && v.q4_1 && v.q5_0 && v.q5_1 && v.q8_0 && v.q4_k && v.q5_k &&
         v.q6_k;
}

}  // namespace

std::optional<GgmlType> ActivationFormatFor(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return GgmlType::kF32;
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ8_0:
      return GgmlType::kQ8_0;
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return GgmlType::kQ8_K;
    default:
      return std::nullopt;
  }
}

int64_t ActivationRowBytes(GgmlType weight_type, int64_t n) {
  const std::optional<GgmlType> format = ActivationFormatFor(weight_type);
  EMBER_CHECK(format.has_value(), "no activation format for GGML type {}",
              static_cast<uint32_t>(weight_type));
  const std::optional<GgmlTypeTraits> traits = GgmlTypeInfo(static_cast<uint32_t>(*format));
  const std::optional<int64_t> bytes = GgmlRowBytes(*traits, n);
  EMBER_CHECK(bytes.has_value(), "{} elements is not a whole number of {} blocks", n, traits->name);
  if (*format != GgmlType::kQ8_0) return *bytes;
  const int64_t blocks = n / kQK;
  return Q8_0BlockSumsOffset(blocks) + blocks * static_cast<int64_t>(sizeof(Q8_0BlockSum));
}

void QuantizeActivationRow(GgmlType weight_type, const float* x, int64_t n, void* out) {
  const std::optional<GgmlType> format = ActivationFormatFor(weight_type);
  EMBER_CHECK(format.has_value(), "no activation format for GGML type {}",
              static_cast<uint32_t>(weight_type));
  switch (*format) {
    case GgmlType::kQ8_0: {
      EMBER_CHECK(n % kQK == 0, "Q8_0 activations need a multiple of 32 elements, got {}", n);
      auto* blocks = static_cast<BlockQ8_0*>(out);
      // Written bytewise: the kernels read them with memcpy too, at any alignment of `out`.
      auto* sums = static_cast<uint8_t*>(out) + Q8_0BlockSumsOffset(n / kQK);
      if (HostCpuFeatures().HasAvx512Set()) {
        QuantizeActivationQ8_0Avx512(x, n, blocks, sums);
      } else {
        QuantizeActivationQ8_0(x, n, blocks, sums);
      }
      break;
    }
    case GgmlType::kQ8_K:
      EMBER_CHECK(n % kQKK == 0, "Q8_K activations need a multiple of 256 elements, got {}", n);
      if (HostCpuFeatures().HasAvx512Set()) {
        QuantizeRowQ8_KAvx512(x, n, static_cast<BlockQ8_K*>(out));
      } else {
        QuantizeRowQ8_K(x, n, static_cast<BlockQ8_K*>(out));
      }
      break;
    default:
      if (n > 0) std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
      break;
  }
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

VecDotFn DotVariant::For(GgmlType weight_type) const {
  switch (weight_type) {
    case GgmlType::kF32:
      return f32;
    case GgmlType::kF16:
      return f16;
    case GgmlType::kBF16:
      return bf16;
    case GgmlType::kQ4_0:
      return q4_0;
    case GgmlType::kQ4_1:
      return q4_1;
    case GgmlType::kQ5_0:
      return q5_0;
    case GgmlType::kQ5_1:
      return q5_1;
    case GgmlType::kQ8_0:
      return q8_0;
    case GgmlType::kQ4_K:
      return q4_k;
    case GgmlType::kQ5_K:
      return q5_k;
    case GgmlType::kQ6_K:
      return q6_k;
    default:
      return nullptr;
  }
}

VecDotRowsFn DotVariant::RowsFor(GgmlType weight_type) const {
  switch (weight_type) {
    case GgmlType::kQ4_0:
      return rows.q4_0;
    case GgmlType::kQ4_1:
      return rows.q4_1;
    case GgmlType::kQ5_0:
      return rows.q5_0;
    case GgmlType::kQ5_1:
      return rows.q5_1;
    case GgmlType::kQ8_0:
      return rows.q8_0;
    case GgmlType::kQ4_K:
      return rows.q4_k;
    case GgmlType::kQ5_K:
      return rows.q5_k;
    case GgmlType::kQ6_K:
      return rows.q6_k;
    default:
      return nullptr;
  }
}

const std::vector<const DotVariant*>& AvailableDotVariants() {
  static const std::vector<const DotVariant*> variants = [] {
    std::vector<const DotVariant*> list = {&kDotRef, &kDotGeneric};
    const CpuFeatures& cpu = HostCpuFeatures();
    if (cpu.HasAvx2Set() && Complete(kDotAvx2)) list.push_back(&kDotAvx2);
    if (cpu.HasAvx512Set() && Complete(kDotAvx512)) list.push_back(&kDotAvx512);
    return list;
  }();
  return variants;
}

const DotVariant& ActiveDotVariant() {
  const DotVariant* active = g_active.load(std::memory_order_acquire);
  if (active == nullptr) {
    const char* forced = std::getenv("EMBER_ISA");
    if (forced != nullptr) active = FindVariant(forced);
    if (active == nullptr) active = AvailableDotVariants().back();
    // Racing first callers compute the same answer, so the last store wins harmlessly.
    g_active.store(active, std::memory_order_release);
  }
  return *active;
}

bool SelectDotVariant(std::string_view name) {
  const DotVariant* v = FindVariant(name);
  if (v == nullptr) return false;
  g_active.store(v, std::memory_order_release);
  return true;
}

}  // namespace ember::quant
