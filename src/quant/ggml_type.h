// GGML tensor types as GGUF files number them, and the traits table: one row per type with its
// block geometry and the kernels ember has for it.
//
// Every quantized GGUF type packs `block_elements` consecutive elements of a row into a block of
// `block_bytes` bytes; rows are whole blocks. The numeric codes are part of the GGUF file format.
//
// The table (ggml_type.cc) is the one place that says what ember does with a type: dequantize it,
// multiply by it (through which activation format), repack it. Code that dispatches on a type
// reads its row instead of switching, so adding a type is a row there plus its kernels (the
// dequantizer, and its dot in every DotVariant, gguf_dot.h); tests/unit/quant/weight_traits_test.cc
// checks the rows against the kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace ember {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};
// One past the largest code in GgmlType: the size of tables indexed by code (DotVariant).
inline constexpr uint32_t kGgmlTypeCodeLimit = 31;

namespace quant {
struct QuantMatrix;
}  // namespace quant

// Writes the f32 values of `blocks` whole blocks of a row (gguf_dequant.h DequantizeRow).
using DequantizeBlocksFn = void (*)(const void* row, int64_t blocks, float* out);
// An activation format's converter (gguf_dot.h QuantizeActivationRow): x[0, n) into `out`.
using QuantizeActivationFn = void (*)(const float* x, int64_t n, void* out);

// A weight type's load-time repacked form for the AVX-512 GEMM (gguf_packed.h).
struct GgufPackedForm {
  int64_t (*bytes)(int64_t rows, int64_t cols);
  void (*pack)(const quant::QuantMatrix& w, uint8_t* out);
  // Output rows of 16-row groups [group_begin, group_end) (quant::PackedRowsAvx512's contract).
  void (*rows_avx512)(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                      const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
};

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;   // "q4_K", as llama.cpp prints it
  int64_t block_elements;  // elements per block (1 for plain types)
  int64_t block_bytes;     // bytes per block
  // Null where ember has none: DequantizeRow returns Unimplemented for the type.
  DequantizeBlocksFn dequantize = nullptr;
  // A weight type GgufMatMul multiplies by: the activation format its dots read (Q8_0, Q8_K or
  // F32). Every DotVariant has a dot for each type that has one.
  std::optional<GgmlType> activation = std::nullopt;
  // An activation format: its converter and the bytes of a row of n elements (a multiple of 4).
  QuantizeActivationFn quantize_activation = nullptr;
  int64_t (*activation_row_bytes)(int64_t n) = nullptr;
  // The repacked form GgufMatMul uses under the avx512 variant, or null.
  const GgufPackedForm* packed = nullptr;
};

// The row of `type`, or null if ember does not know it.
const GgmlTypeTraits* FindGgmlType(GgmlType type);
// Every row, in code order (tests walk it).
std::span<const GgmlTypeTraits> GgmlTypeTable();

// Traits for a type code read from a file, or nullopt if ember does not know the code (the
// IQ*/TQ* families and removed types).
std::optional<GgmlTypeTraits> GgmlTypeInfo(uint32_t code);

// Bytes of a row of `elements` elements; nullopt if `elements` is not a whole number of blocks.
std::optional<int64_t> GgmlRowBytes(const GgmlTypeTraits& traits, int64_t elements);

}  // namespace ember
