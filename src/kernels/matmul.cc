#include "kernels/matmul.h"

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/variants.h"

namespace ember::kernels {

// Slot per Isa level, slowest first (core/isa.h). constinit: kernels may run from other
// translation units' static initialisers, before any dynamic initialisation here. The amx level
// runs the avx512 objects: no kernel of this family uses the tiles.
constinit const IsaTable<KernelVariant> kKernelVariants(
    "kernels::KernelVariant", {&kRefVariant, &kGenericVariant, &kAvx2Variant, &kAvx512Variant, &kAvx512Variant});

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
