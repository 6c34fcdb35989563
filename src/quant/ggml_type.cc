#include "quant/ggml_type.h"

#include <array>

#include "quant/gguf_type_entries.h"

namespace ember {
namespace {

namespace e = quant::entries;

// Block geometry per ggml's file format: QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 = 32 elements,
// K-quants use super-blocks of QK_K = 256. Q8_0, Q8_K and F32 double as the activation formats
// of the dots; Q8_1 and Q2_K / Q3_K dequantize but have no dot (no model ember runs multiplies by
// them); the integer and f64 types are only metadata tensors.
constexpr GgmlTypeTraits kTable[] = {
    {.type = GgmlType::kF32, .name = "f32", .block_elements = 1, .block_bytes = 4,
     .dequantize = &e::DequantizeF32, .activation = GgmlType::kF32,
     .quantize_activation = &e::QuantizeActivationF32, .activation_row_bytes = &e::ActivationRowBytesF32},
    {.type = GgmlType::kF16, .name = "f16", .block_elements = 1, .block_bytes = 2,
     .dequantize = &e::DequantizeF16, .activation = GgmlType::kF32},
    {.type = GgmlType::kQ4_0, .name = "q4_0", .block_elements = 32, .block_bytes = 2 + 16,
     .dequantize = &e::DequantizeQ4_0, .activation = GgmlType::kQ8_0},
    {.type = GgmlType::kQ4_1, .name = "q4_1", .block_elements = 32, .block_bytes = 2 + 2 + 16,
     .dequantize = &e::DequantizeQ4_1, .activation = GgmlType::kQ8_0},
    {.type = GgmlType::kQ5_0, .name = "q5_0", .block_elements = 32, .block_bytes = 2 + 4 + 16,
     .dequantize = &e::DequantizeQ5_0, .activation = GgmlType::kQ8_0, .packed = &e::kPackedQ5_0},
    {.type = GgmlType::kQ5_1, .name = "q5_1", .block_elements = 32, .block_bytes = 2 + 2 + 4 + 16,
     .dequantize = &e::DequantizeQ5_1, .activation = GgmlType::kQ8_0},
    {.type = GgmlType::kQ8_0, .name = "q8_0", .block_elements = 32, .block_bytes = 2 + 32,
     .dequantize = &e::DequantizeQ8_0, .activation = GgmlType::kQ8_0,
     .quantize_activation = &e::QuantizeActivationQ8_0, .activation_row_bytes = &e::ActivationRowBytesQ8_0},
    {.type = GgmlType::kQ8_1, .name = "q8_1", .block_elements = 32, .block_bytes = 4 + 32,
     .dequantize = &e::DequantizeQ8_1},
    {.type = GgmlType::kQ2_K, .name = "q2_K", .block_elements = 256, .block_bytes = 16 + 64 + 2 + 2,
     .dequantize = &e::DequantizeQ2_K},
    {.type = GgmlType::kQ3_K, .name = "q3_K", .block_elements = 256, .block_bytes = 32 + 64 + 12 + 2,
     .dequantize = &e::DequantizeQ3_K},
    {.type = GgmlType::kQ4_K, .name = "q4_K", .block_elements = 256, .block_bytes = 2 + 2 + 12 + 128,
     .dequantize = &e::DequantizeQ4_K, .activation = GgmlType::kQ8_K, .packed = &e::kPackedQ4_K},
    {.type = GgmlType::kQ5_K, .name = "q5_K", .block_elements = 256, .block_bytes = 2 + 2 + 12 + 32 + 128,
     .dequantize = &e::DequantizeQ5_K, .activation = GgmlType::kQ8_K},
    {.type = GgmlType::kQ6_K, .name = "q6_K", .block_elements = 256, .block_bytes = 128 + 64 + 16 + 2,
     .dequantize = &e::DequantizeQ6_K, .activation = GgmlType::kQ8_K},
    {.type = GgmlType::kQ8_K, .name = "q8_K", .block_elements = 256, .block_bytes = 4 + 256 + 32,
     .dequantize = &e::DequantizeQ8_K, .quantize_activation = &e::QuantizeActivationQ8_K,
     .activation_row_bytes = &e::ActivationRowBytesQ8_K},
    {.type = GgmlType::kI8, .name = "i8", .block_elements = 1, .block_bytes = 1},
    {.type = GgmlType::kI16, .name = "i16", .block_elements = 1, .block_bytes = 2},
    {.type = GgmlType::kI32, .name = "i32", .block_elements = 1, .block_bytes = 4},
    {.type = GgmlType::kI64, .name = "i64", .block_elements = 1, .block_bytes = 8},
    {.type = GgmlType::kF64, .name = "f64", .block_elements = 1, .block_bytes = 8},
    {.type = GgmlType::kBF16, .name = "bf16", .block_elements = 1, .block_bytes = 2,
     .dequantize = &e::DequantizeBF16, .activation = GgmlType::kF32},
};

// Row index per code (-1: unknown), so a lookup is one load rather than a scan.
constexpr std::array<int8_t, kGgmlTypeCodeLimit> kIndex = [] {
  std::array<int8_t, kGgmlTypeCodeLimit> index{};
  index.fill(-1);
  for (size_t i = 0; i < std::size(kTable); ++i) index[static_cast<uint32_t>(kTable[i].type)] = static_cast<int8_t>(i);
  return index;
}();

}  // namespace

const GgmlTypeTraits* FindGgmlType(GgmlType type) {
  const auto code = static_cast<uint32_t>(type);
  if (code >= kGgmlTypeCodeLimit || kIndex[code] < 0) return nullptr;
  return &kTable[kIndex[code]];
}

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
