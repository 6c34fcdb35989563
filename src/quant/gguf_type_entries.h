// The per-type kernels the GGUF kernel table (gguf_type_kernels.cc) points at, internal to src/quant.
// Each is defined next to the code it belongs to: dequantizers in gguf_dequant.cc, activation
// converters in gguf_dot.cc, repacked forms in gguf_packed.cc.
#pragma once

#include <cstdint>

#include "quant/gguf_type_kernels.h"

namespace ember::quant::entries {

// DequantizeBlocksFn: `blocks` blocks of one row to f32 (for plain types a block is an element).
void DequantizeF32(const void* row, int64_t blocks, float* out);
void DequantizeF16(const void* row, int64_t blocks, float* out);
void DequantizeBF16(const void* row, int64_t blocks, float* out);
void DequantizeQ4_0(const void* row, int64_t blocks, float* out);
void DequantizeQ4_1(const void* row, int64_t blocks, float* out);
void DequantizeQ5_0(const void* row, int64_t blocks, float* out);
void DequantizeQ5_1(const void* row, int64_t blocks, float* out);
void DequantizeQ8_0(const void* row, int64_t blocks, float* out);
void DequantizeQ8_1(const void* row, int64_t blocks, float* out);
void DequantizeQ2_K(const void* row, int64_t blocks, float* out);
void DequantizeQ3_K(const void* row, int64_t blocks, float* out);
void DequantizeQ4_K(const void* row, int64_t blocks, float* out);
void DequantizeQ5_K(const void* row, int64_t blocks, float* out);
void DequantizeQ6_K(const void* row, int64_t blocks, float* out);
void DequantizeQ8_K(const void* row, int64_t blocks, float* out);

// The activation formats (gguf_dot.h): converter and row bytes.
void QuantizeActivationF32(const float* x, int64_t n, void* out);
void QuantizeActivationQ8_0(const float* x, int64_t n, void* out);
void QuantizeActivationQ8_K(const float* x, int64_t n, void* out);
int64_t ActivationRowBytesF32(int64_t n);
int64_t ActivationRowBytesQ8_0(int64_t n);
int64_t ActivationRowBytesQ8_K(int64_t n);

// The repacked forms (gguf_packed.h).
extern const GgufPackedForm kPackedQ4_0;
extern const GgufPackedForm kPackedQ4_1;
extern const GgufPackedForm kPackedQ5_0;
extern const GgufPackedForm kPackedQ5_1;
extern const GgufPackedForm kPackedQ8_0;
extern const GgufPackedForm kPackedQ4_K;
extern const GgufPackedForm kPackedQ5_K;
extern const GgufPackedForm kPackedQ6_K;

}  // namespace ember::quant::entries
