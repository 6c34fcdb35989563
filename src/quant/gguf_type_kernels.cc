#include "quant/gguf_type_kernels.h"

#include "quant/gguf_type_entries.h"

namespace ember::quant {
namespace {

namespace e = entries;

// Q8_0, Q8_K and F32 double as the activation formats of the dots; Q8_1 and Q2_K / Q3_K
// dequantize but have no dot (no model ember runs multiplies by them).
constexpr GgufTypeKernels kTable[] = {
    {.type = GgmlType::kF32, .dequantize = &e::DequantizeF32, .activation = GgmlType::kF32,
     .quantize_activation = &e::QuantizeActivationF32, .activation_row_bytes = &e::ActivationRowBytesF32},
    {.type = GgmlType::kF16, .dequantize = &e::DequantizeF16, .activation = GgmlType::kF32},
    {.type = GgmlType::kQ4_0, .dequantize = &e::DequantizeQ4_0, .activation = GgmlType::kQ8_0,
     .packed = &e::kPackedQ4_0},
    {.type = GgmlType::kQ4_1, .dequantize = &e::DequantizeQ4_1, .activation = GgmlType::kQ8_0,
     .packed = &e::kPackedQ4_1},
    {.type = GgmlType::kQ5_0, .dequantize = &e::DequantizeQ5_0, .activation = GgmlType::kQ8_0,
     .packed = &e::kPackedQ5_0},
    {.type = GgmlType::kQ5_1, .dequantize = &e::DequantizeQ5_1, .activation = GgmlType::kQ8_0,
     .packed = &e::kPackedQ5_1},
    {.type = GgmlType::kQ8_0, .dequantize = &e::DequantizeQ8_0, .activation = GgmlType::kQ8_0,
     .quantize_activation = &e::QuantizeActivationQ8_0, .activation_row_bytes = &e::ActivationRowBytesQ8_0,
     .packed = &e::kPackedQ8_0},
    {.type = GgmlType::kQ8_1, .dequantize = &e::DequantizeQ8_1},
    {.type = GgmlType::kQ2_K, .dequantize = &e::DequantizeQ2_K},
    {.type = GgmlType::kQ3_K, .dequantize = &e::DequantizeQ3_K},
    {.type = GgmlType::kQ4_K, .dequantize = &e::DequantizeQ4_K, .activation = GgmlType::kQ8_K,
     .packed = &e::kPackedQ4_K},
    {.type = GgmlType::kQ5_K, .dequantize = &e::DequantizeQ5_K, .activation = GgmlType::kQ8_K,
     .packed = &e::kPackedQ5_K},
    {.type = GgmlType::kQ6_K, .dequantize = &e::DequantizeQ6_K, .activation = GgmlType::kQ8_K,
     .packed = &e::kPackedQ6_K},
    {.type = GgmlType::kQ8_K, .dequantize = &e::DequantizeQ8_K, .quantize_activation = &e::QuantizeActivationQ8_K,
     .activation_row_bytes = &e::ActivationRowBytesQ8_K},
    {.type = GgmlType::kBF16, .dequantize = &e::DequantizeBF16, .activation = GgmlType::kF32},
};

constexpr GgmlCodeIndex<GgufTypeKernels> kIndex(kTable);

}  // namespace

const GgufTypeKernels* FindGgufKernels(GgmlType type) { return kIndex.Find(type); }

std::span<const GgufTypeKernels> GgufKernelTable() { return kTable; }

}  // namespace ember::quant
