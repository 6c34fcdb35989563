#include "formats/ggml_type.h"

namespace ember {
namespace {

// Block geometry per ggml's file format: QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 = 32 elements,
// K-quants use super-blocks of QK_K = 256.
constexpr GgmlTypeTraits kTable[] = {
    {.type = GgmlType::kF32, .name = "f32", .block_elements = 1, .block_bytes = 4},
    {.type = GgmlType::kF16, .name = "f16", .block_elements = 1, .block_bytes = 2},
    {.type = GgmlType::kQ4_0, .name = "q4_0", .block_elements = 32, .block_bytes = 2 + 16},
    {.type = GgmlType::kQ4_1, .name = "q4_1", .block_elements = 32, .block_bytes = 2 + 2 + 16},
    {.type = GgmlType::kQ5_0, .name = "q5_0", .block_elements = 32, .block_bytes = 2 + 4 + 16},
    {.type = GgmlType::kQ5_1, .name = "q5_1", .block_elements = 32, .block_bytes = 2 + 2 + 4 + 16},
    {.type = GgmlType::kQ8_0, .name = "q8_0", .block_elements = 32, .block_bytes = 2 + 32},
    {.type = GgmlType::kQ8_1, .name = "q8_1", .block_elements = 32, .block_bytes = 4 + 32},
    {.type = GgmlType::kQ2_K, .name = "q2_K", .block_elements = 256, .block_bytes = 16 + 64 + 2 + 2},
    {.type = GgmlType::kQ3_K, .name = "q3_K", .block_elements = 256, .block_bytes = 32 + 64 + 12 + 2},
    {.type = GgmlType::kQ4_K, .name = "q4_K", .block_elements = 256, .block_bytes = 2 + 2 + 12 + 128},
    {.type = GgmlType::kQ5_K, .name = "q5_K", .block_elements = 256, .block_bytes = 2 + 2 + 12 + 32 + 128},
    {.type = GgmlType::kQ6_K, .name = "q6_K", .block_elements = 256, .block_bytes = 128 + 64 + 16 + 2},
    {.type = GgmlType::kQ8_K, .name = "q8_K", .block_elements = 256, .block_bytes = 4 + 256 + 32},
    {.type = GgmlType::kI8, .name = "i8", .block_elements = 1, .block_bytes = 1},
    {.type = GgmlType::kI16, .name = "i16", .block_elements = 1, .block_bytes = 2},
    {.type = GgmlType::kI32, .name = "i32", .block_elements = 1, .block_bytes = 4},
    {.type = GgmlType::kI64, .name = "i64", .block_elements = 1, .block_bytes = 8},
    {.type = GgmlType::kF64, .name = "f64", .block_elements = 1, .block_bytes = 8},
    {.type = GgmlType::kBF16, .name = "bf16", .block_elements = 1, .block_bytes = 2},
};

constexpr GgmlCodeIndex<GgmlTypeTraits> kIndex(kTable);

}  // namespace

const GgmlTypeTraits* FindGgmlType(GgmlType type) { return kIndex.Find(type); }

std::span<const GgmlTypeTraits> GgmlTypeTable() { return kTable; }

std::optional<GgmlTypeTraits> GgmlTypeInfo(uint32_t code) {
  const GgmlTypeTraits* traits = FindGgmlType(static_cast<GgmlType>(code));
  if (traits == nullptr) return std::nullopt;
  return *traits;
}

std::optional<int64_t> GgmlRowBytes(const GgmlTypeTraits& traits, int64_t elements) {
  if (elements < 0 || elements % traits.block_elements != 0) return std::nullopt;
  return elements / traits.block_elements * traits.block_bytes;
}

}  // namespace ember
