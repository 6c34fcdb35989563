#include "formats/ggml_type.h"

namespace ember {

std::optional<GgmlTypeTraits> GgmlTypeInfo(uint32_t code) {
  // Block geometry per ggml's file format: QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 = 32 elements,
  // K-quants use super-blocks of QK_K = 256.
  switch (static_cast<GgmlType>(code)) {
    case GgmlType::kF32: return GgmlTypeTraits{GgmlType::kF32, "f32", 1, 4};
    case GgmlType::kF16: return GgmlTypeTraits{GgmlType::kF16, "f16", 1, 2};
    case GgmlType::kQ4_0: return GgmlTypeTraits{GgmlType::kQ4_0, "q4_0", 32, 2 + 16};
    case GgmlType::kQ4_1: return GgmlTypeTraits{GgmlType::kQ4_1, "q4_1", 32, 2 + 2 + 16};
    case GgmlType::kQ5_0: return GgmlTypeTraits{GgmlType::kQ5_0, "q5_0", 32, 2 + 4 + 16};
    case GgmlType::kQ5_1: return GgmlTypeTraits{GgmlType::kQ5_1, "q5_1", 32, 2 + 2 + 4 + 16};
    case GgmlType::kQ8_0: return GgmlTypeTraits{GgmlType::kQ8_0, "q8_0", 32, 2 + 32};
    case GgmlType::kQ8_1: return GgmlTypeTraits{GgmlType::kQ8_1, "q8_1", 32, 4 + 32};
    case GgmlType::kQ2_K: return GgmlTypeTraits{GgmlType::kQ2_K, "q2_K", 256, 16 + 64 + 2 + 2};
    case GgmlType::kQ3_K: return GgmlTypeTraits{GgmlType::kQ3_K, "q3_K", 256, 32 + 64 + 12 + 2};
    case GgmlType::kQ4_K: return GgmlTypeTraits{GgmlType::kQ4_K, "q4_K", 256, 2 + 2 + 12 + 128};
    case GgmlType::kQ5_K: return GgmlTypeTraits{GgmlType::kQ5_K, "q5_K", 256, 2 + 2 + 12 + 32 + 128};
    case GgmlType::kQ6_K: return GgmlTypeTraits{GgmlType::kQ6_K, "q6_K", 256, 128 + 64 + 16 + 2};
    case GgmlType::kQ8_K: return GgmlTypeTraits{GgmlType::kQ8_K, "q8_K", 256, 4 + 256 + 32};
    case GgmlType::kI8: return GgmlTypeTraits{GgmlType::kI8, "i8", 1, 1};
    case GgmlType::kI16: return GgmlTypeTraits{GgmlType::kI16, "i16", 1, 2};
    case GgmlType::kI32: return GgmlTypeTraits{GgmlType::kI32, "i32", 1, 4};
    case GgmlType::kI64: return GgmlTypeTraits{GgmlType::kI64, "i64", 1, 8};
    case GgmlType::kF64: return GgmlTypeTraits{GgmlType::kF64, "f64", 1, 8};
    case GgmlType::kBF16: return GgmlTypeTraits{GgmlType::kBF16, "bf16", 1, 2};
  }
  return std::nullopt;
}

std::optional<int64_t> GgmlRowBytes(const GgmlTypeTraits& traits, int64_t elements) {
  if (elements < 0 || elements % traits.block_elements != 0) return std::nullopt;
  return elements / traits.block_elements * traits.block_bytes;
}

}  // namespace ember
