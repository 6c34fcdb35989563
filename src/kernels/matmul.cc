#include "kernels/matmul.h"

#include <cstdlib>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/variants.h"

namespace ember::kernels {
namespace {

const KernelVariant* g_active = nullptr;

const KernelVariant* FindVariant(std::string_view name) {
  for (const KernelVariant* v : AvailableVariants()) {
    if (v->name == name) return v;
  }
  return nullptr;
}

}  // namespace

const std::vector<const KernelVariant*>& AvailableVariants() {
  static const std::vector<const KernelVariant*> variants = [] {
    std::vector<const KernelVariant*> list = {&kRefVariant, &kGenericVariant};
    const CpuFeatures& cpu = HostCpuFeatures();
    if (cpu.HasAvx2Set() && kAvx2Variant.matmul_bf16 != nullptr) list.push_back(&kAvx2Variant);
    if (cpu.HasAvx512Set() && kAvx512Variant.matmul_bf16 != nullptr) list.push_back(&kAvx512Variant);
    return list;
  }();
  return variants;
}

const KernelVariant& ActiveVariant() {
  if (g_active == nullptr) {
    const char* forced = std::getenv("EMBER_ISA");
    if (forced != nullptr) g_active = FindVariant(forced);
    if (g_active == nullptr) g_active = AvailableVariants().back();
  }
  return *g_active;
}

bool SelectVariant(std::string_view name) {
  const KernelVariant* v = FindVariant(name);
  if (v == nullptr) return false;
  g_active = v;
  return true;
}

void MatMul(const float* x, int64_t m, const TensorView& w, float* y) {
  EMBER_CHECK(w.shape.rank() == 2, "weight must be 2-D, got {}", w.shape.ToString());
  const int64_t n = w.shape[0];
  const int64_t k = w.shape[1];
  const KernelVariant& variant = ActiveVariant();
  // Chunks of at least 16 output columns keep per-thread work above the dispatch cost.
  if (w.dtype == DType::kBF16) {
    const auto* weights = w.As<uint16_t>();
    ThreadPool::Global().ParallelFor(
        n, [&](int64_t b, int64_t e) { variant.matmul_bf16(x, m, k, weights, b, e, y, n); }, 16);
  } else if (w.dtype == DType::kF32) {
    const auto* weights = w.As<float>();
    ThreadPool::Global().ParallelFor(
        n, [&](int64_t b, int64_t e) { variant.matmul_f32(x, m, k, weights, b, e, y, n); }, 16);
  } else {
    EMBER_CHECK(false, "MatMul: unsupported weight dtype {}", DTypeName(w.dtype));
  }
}

}  // namespace ember::kernels
