// The kernel half of the GGML type traits: one row per GGUF type ember computes with, saying what
// its kernels do with it (the file-format half, names and block geometry, is
// formats/ggml_type.h, keyed by the same codes). Code that dispatches on a type reads its row
// instead of switching, so adding a type is its geometry row there, a row here, and its kernels
// (the dequantizer, and its dot in every DotVariant, gguf_dot.h);
// tests/unit/quant/weight_traits_test.cc checks the rows against the kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "formats/ggml_type.h"

namespace ember::quant {

struct QuantMatrix;

// Writes the f32 values of `blocks` whole blocks of a row (gguf_dequant.h DequantizeRow).
using DequantizeBlocksFn = void (*)(const void* row, int64_t blocks, float* out);
// An activation format's converter (gguf_dot.h QuantizeActivationRow): x[0, n) into `out`.
using QuantizeActivationFn = void (*)(const float* x, int64_t n, void* out);

// A weight type's load-time repacked form for the AVX-512 and AMX GEMMs (gguf_packed.h).
struct GgufPackedForm {
  int64_t (*bytes)(int64_t rows, int64_t cols);
  void (*pack)(const QuantMatrix& w, uint8_t* out);
  // Output rows of 16-row groups [group_begin, group_end) (PackedRowsAvx512's contract).
  void (*rows_avx512)(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                      const uint8_t* act, int64_t m, int64_t act_bytes, float* y);
  // The same with AMX tiles and the same bits (PackedRowsAmx's contract: act padded to whole
  // 16-row tiles), or null: the amx variant then runs rows_avx512.
  void (*rows_amx)(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                   const uint8_t* act, int64_t m, int64_t act_bytes, float* y) = nullptr;
  // GgufMatMul calls rows_amx from this many activation rows up (below, the avx512 tiles are
  // faster: gguf_packed.h kAmxMinRows).
  int64_t amx_min_rows = 0;
  // Where the GEMM needs more per activation row than the activation format holds (Q8_0's
  // integer block sums): the bytes appended to a row of k elements, and the function that
  // fills them from the quantized row, or null.
  int64_t (*extra_activation_bytes)(int64_t k) = nullptr;
  void (*extend_activation)(uint8_t* row, int64_t k) = nullptr;
  // The same contract and bits as rows_avx512 with AVX2 only (it reads no activation extension),
  // or null: the avx2 variant then keeps no packed copy and runs its row dots.
  void (*rows_avx2)(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
                    const uint8_t* act, int64_t m, int64_t act_bytes, float* y) = nullptr;
};

struct GgufTypeKernels {
  GgmlType type;
  // Null where ember has none: DequantizeRow returns Unimplemented for the type.
  DequantizeBlocksFn dequantize = nullptr;
  // A weight type GgufMatMul multiplies by: the activation format its dots read (Q8_0, Q8_K or
  // F32). Every DotVariant has a dot for each type that has one.
  std::optional<GgmlType> activation = std::nullopt;
  // An activation format: its converter and the bytes of a row of n elements (a multiple of 4).
  QuantizeActivationFn quantize_activation = nullptr;
  int64_t (*activation_row_bytes)(int64_t n) = nullptr;
  // The repacked form GgufMatMul uses under the avx512 and amx variants, or null.
  const GgufPackedForm* packed = nullptr;
};

// The row of `type`, or null if ember has no kernel for it (integer and f64 metadata types).
const GgufTypeKernels* FindGgufKernels(GgmlType type);
// Every row, in code order (tests walk it).
std::span<const GgufTypeKernels> GgufKernelTable();

}  // namespace ember::quant
