// Block-scaled weight formats of the Muse Spark checkpoints: MXFP4 (OCP MX v1.0), NVFP4
// (NVIDIA ModelOpt) and FP8 e4m3 (per-tensor, per-channel or 128x128-block scales).
//
// Weights stay in the producers' split-plane layout (codes and scales are separate tensors in a
// safetensors checkpoint), so a matrix is a view over mmapped bytes with no copy. HF orientation:
// rows = output features, cols = input features (K); element (r, k).
//
//   format  codes (uint8)                              scales                                global
//   MXFP4   [rows, cols/2], 2 e2m1 per byte,           e8m0 [rows, cols/32]                  1 (any f32)
//           low nibble = even k, high = odd k
//   NVFP4   same as MXFP4                              e4m3 [rows, cols/16]                  weight_scale_2
//   FP8     [rows, cols] e4m3fn                        per-tensor: none (the global scale);   scale
//                                                      per-channel: f32 [rows];
//                                                      block: f32 [ceil(rows/128), ceil(cols/128)]
//
// Dequantization (f32, in this order, so that it matches the producers bit for bit):
//   w[r, k] = element(code[r, k]) * (block_scale(r, k) * global_scale)
// with block_scale 2^(e-127) (MXFP4), e4m3 (NVFP4; ModelOpt computes e4m3 * weight_scale_2 first,
// then multiplies), the f32 per-channel / per-block scale (FP8 `weight_scale_inv` style: value =
// fp8 * scale), or 1 for FP8 per-tensor. Multiplying by a global scale of 1 is exact.
//
// NVFP4 gate/up halves with separate global scales (the Muse checkpoint's weight_scale_2 [E, 2])
// are two views of the same tensor (SliceRows), each with its own global_scale.
//
// The scalar codecs are thin names over core/dtypes.h (exact, exhaustively tested there and in
// tests/unit/quant/block_scaled_test.cc).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/dtypes.h"
#include "core/status.h"

namespace ember::quant {

enum class WeightFormat : uint8_t { kMxfp4, kNvfp4, kFp8E4m3 };
inline constexpr int kWeightFormatCount = 3;
enum class Fp8ScaleKind : uint8_t { kPerTensor, kPerChannel, kBlock128 };

constexpr int64_t kMxfp4BlockSize = 32;  // elements along K per e8m0 scale
constexpr int64_t kNvfp4BlockSize = 16;  // elements along K per e4m3 scale
constexpr int64_t kFp8ScaleBlock = 128;  // 128x128 blocks of Fp8ScaleKind::kBlock128
constexpr int kE2m1Emax = 2;             // emax_elem of e2m1 in the OCP MX scale rule
constexpr float kE2m1Max = 6.0f;
constexpr float kE4m3Max = 448.0f;

// The traits table (block_scaled.cc): one row per format with what the geometry functions below
// and the matmul (block_scaled_matmul.cc) read, so that a new format is a row there plus its
// kernels (a dot in every BlockDotVariant, block_scaled_dot.h), not a case in each function.
struct WeightFormatTraits {
  WeightFormat format;
  std::string_view name;   // "mxfp4", "nvfp4", "fp8"
  int64_t k_block;         // elements along K per scale byte; 1 for FP8
  int64_t codes_per_byte;  // 2 for FP4, 1 for FP8
  // Bytes of scale per k_block elements of a row: 1 for FP4 (e8m0 / e4m3), 0 for FP8, whose f32
  // scales are per tensor, channel or 128x128 block (Fp8ScaleCount).
  int64_t scale_bytes_per_block;
  // FP4: activations are quantized to the int8 rows of block_scaled_dot.h and reduced with the
  // variant's Fp4For(format) dot. FP8: its dot reads the f32 rows.
  bool int8_activations;
};
const WeightFormatTraits& FormatTraits(WeightFormat format);

// "mxfp4", "nvfp4", "fp8".
std::string_view WeightFormatName(WeightFormat format);
// "per-tensor", "per-channel", "block128".
std::string_view Fp8ScaleKindName(Fp8ScaleKind kind);

// ---- scalar codecs --------------------------------------------------------------------------------
// e2m1 code in the low 4 bits (sign << 3 | magnitude code): +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
inline float E2m1ToFloat(uint8_t code) { return F4E2M1ToF32(code); }
// 2^(e - 127); 0 is 2^-127 (an f32 subnormal); 0xFF is NaN.
inline float E8m0ToFloat(uint8_t code) { return E8M0ToF32(code); }
// float8_e4m3fn: no infinities, 0x7F / 0xFF NaN, max 448.
inline float E4m3ToFloat(uint8_t code) { return F8E4M3ToF32(code); }
// Round to nearest, ties to even; saturates to +-6 (inf too); NaN -> +0.
inline uint8_t FloatToE2m1(float value) { return F32ToF4E2M1(value); }
// Round to nearest, ties to even; overflow and inf saturate to +-448; NaN -> NaN.
inline uint8_t FloatToE4m3(float value) { return F32ToF8E4M3(value, /*saturate=*/true); }
// The OCP MX v1.0 shared scale of a block whose largest magnitude is `amax`:
// 2^(floor(log2(amax)) - emax_elem), clamped to the e8m0 range [2^-127, 2^127]; amax 0 gives the
// smallest scale (code 0); NaN or inf amax gives 0xFF (NaN).
uint8_t FloatToE8m0(float amax, int emax_elem = kE2m1Emax);

// How an MXFP4 quantizer picks a block's e8m0 scale from the block's largest magnitude amax.
enum class Mxfp4ScaleRounding : uint8_t {
  // OCP MX v1.0 (and Quark's "floor"): FloatToE8m0(amax) = 2^(floor(log2(amax)) - 2). Blocks with
  // amax in [1.75, 2) * 2^k land in [7, 8) after scaling and saturate to 6.
  kFloor,
  // Quark's default "even" (amd-quark 0.13 `even_round`; AITER's dynamic_mxfp4_quant computes the
  // same): amax is first rounded to one mantissa bit in f32 (add 2^21 to its bits, keep sign and
  // exponent), so [1.75, 2) * 2^k goes up to 2^(k+1) and scales to [3.5, 4) instead of
  // saturating; then floor(log2) - 2, clamped to the e8m0 range.
  kEven,
};
// "floor", "even" (Quark's scale_calculation_mode names).
std::string_view Mxfp4ScaleRoundingName(Mxfp4ScaleRounding rounding);
// The e8m0 code of a block with largest magnitude amax; NaN or inf amax gives 0xFF (NaN).
uint8_t Mxfp4ScaleCode(float amax, Mxfp4ScaleRounding rounding);

// ---- geometry ------------------------------------------------------------------------------------
// Elements along K that share one scale byte (32, 16) or, for FP8, 1 (its scales are not
// per-K-block bytes).
int64_t KBlockSize(WeightFormat format);
// Dense bytes of one row of codes / of scales for `cols` input features (FP8: scales 0 here;
// use Fp8ScaleCount).
int64_t CodesRowBytes(WeightFormat format, int64_t cols);
int64_t ScalesRowBytes(WeightFormat format, int64_t cols);
// f32 scales of an FP8 matrix: 0 (per-tensor), rows, ceil(rows/128) * ceil(cols/128).
int64_t Fp8ScaleCount(Fp8ScaleKind kind, int64_t rows, int64_t cols);

// A [rows, cols] weight matrix in one of the formats, viewing caller-owned memory.
struct BlockScaledMatrix {
  WeightFormat format = WeightFormat::kMxfp4;
  int64_t rows = 0;  // output features
  int64_t cols = 0;  // input features (K); a multiple of KBlockSize for MXFP4 / NVFP4, of 16 for FP8
  const uint8_t* codes = nullptr;
  int64_t codes_row_stride = 0;  // bytes between rows of codes (>= CodesRowBytes)
  // MXFP4: uint8 e8m0, NVFP4: uint8 e4m3, FP8 per-channel / block: f32; unused for FP8 per-tensor.
  const void* scales = nullptr;
  // Bytes between rows of scales (FP8 block: between rows of 128x128 blocks; per-channel: 4).
  int64_t scales_row_stride = 0;
  float global_scale = 1.0f;  // NVFP4 weight_scale_2; FP8 per-tensor scale; 1 otherwise
  Fp8ScaleKind fp8_scale_kind = Fp8ScaleKind::kPerTensor;
  // Optional load-time repacked copy of these rows for the packed FP4 GEMM (block_scaled_packed.h:
  // 16-row groups, group 0 = rows 0..15 of this view), owned by whoever made it (Linear,
  // ExpertWeights); null: the row dots run. The codes and scales above stay authoritative
  // (DequantizeRow and the levels without a packed GEMM read them).
  const uint8_t* packed = nullptr;

  // Bytes a full pass over the matrix reads (codes + scales, dense): what GEMV streams.
  int64_t PackedBytes() const;
};

// A dense view: strides = CodesRowBytes / ScalesRowBytes (FP8 per-channel 4, block
// 4 * ceil(cols/128)).
BlockScaledMatrix DenseBlockScaledMatrix(WeightFormat format, int64_t rows, int64_t cols, const uint8_t* codes,
                                         const void* scales, float global_scale = 1.0f,
                                         Fp8ScaleKind fp8_scale_kind = Fp8ScaleKind::kPerTensor);

// Rows [row_begin, row_begin + rows) of w as a matrix of its own (same strides and scales), e.g.
// the gate or the up half of a fused gate_up tensor, each then given its own global_scale.
// InvalidArgument if the range is outside w, or for FP8 128x128-block scales if row_begin is not a
// multiple of 128 (the blocks would not line up).
Expected<BlockScaledMatrix> SliceRows(const BlockScaledMatrix& w, int64_t row_begin, int64_t rows);

// OK, or InvalidArgument naming what is wrong (cols not a multiple of the block, null pointers,
// strides shorter than a row, ...). Loaders call this once per tensor; the matmul only CHECKs.
Status ValidateBlockScaledMatrix(const BlockScaledMatrix& w);

// out[0, cols) = row `row` of w in f32 (the formula at the top of this file).
void DequantizeRow(const BlockScaledMatrix& w, int64_t row, float* out);

// y [m, w.rows] = x [m, w.cols] · W^T with the active kernel variant (block_scaled_dot.h),
// threaded over output rows. y[i, j] does not depend on m, the thread count or the split.
// w must pass ValidateBlockScaledMatrix (checked).
void BlockScaledMatMul(const float* x, int64_t m, const BlockScaledMatrix& w, float* y);

// The most matrices one BlockScaledMatMulShared call takes.
inline constexpr size_t kMaxSharedBlockScaled = 4;

// ys[i] = BlockScaledMatMul(x, m, *ws[i]) for matrices of the same input width, bit for bit, with
// x's int8 rows prepared once for every FP4 matrix that reads the same layout (NVFP4 and MXFP4
// alike): a layer's q/k/v, or its gate and up.
void BlockScaledMatMulShared(const float* x, int64_t m, std::span<const BlockScaledMatrix* const> ws,
                             std::span<float* const> ys);

// ---- scalar reference quantizers (dense outputs; x is [rows, cols] f32) -------------------------
// MXFP4: per 32 elements, e = Mxfp4ScaleCode(amax, rounding), codes = FloatToE2m1(x / 2^(e-127))
// (round to nearest even, saturating at 6; whatever rounds to zero encodes as +0, as amd-quark
// writes it). kFloor is OCP MX v1.0, kEven Quark's default; each equals Quark's quantizer in that
// mode byte for byte (tests/unit/model/quantized_weights_test.cc).
// codes: rows * cols/2 bytes, scales: rows * cols/32 bytes.
Status QuantizeMxfp4(const float* x, int64_t rows, int64_t cols, uint8_t* codes, uint8_t* scales,
                     Mxfp4ScaleRounding rounding = Mxfp4ScaleRounding::kFloor);

// ModelOpt's global scale: amax / (6 * 448) (amax over the tensor, or over each of the gate and up
// halves for the Muse experts); 1 for an all-zero tensor (where ModelOpt would write NaN scales).
float Nvfp4GlobalScale(float amax);
// NVFP4 as ModelOpt 0.47 quantizes: block scale s = e4m3(clamp(amax_block / (6 * weight_scale_2),
// 2^-9, 448)) with 1.0 for an all-zero block; codes = e2m1 of x / (s * weight_scale_2) with
// ModelOpt's sign rule (x < 0, so -0 encodes as +0). codes: rows * cols/2, scales: rows * cols/16.
Status QuantizeNvfp4(const float* x, int64_t rows, int64_t cols, float weight_scale_2, uint8_t* codes, uint8_t* scales);

// FP8 e4m3 with scale = amax / 448 over the tensor, each row, or each 128x128 block (1 where the
// amax is 0); codes = e4m3(x / scale), saturating. `scales` receives Fp8ScaleCount f32 values
// (dense, row-major over blocks); `global_scale` the per-tensor scale (1 for the other kinds).
Status QuantizeFp8(const float* x, int64_t rows, int64_t cols, Fp8ScaleKind kind, uint8_t* codes, float* scales,
                   float* global_scale);

// Largest |x| over n values (NaN-free input assumed).
float AbsMax(const float* x, int64_t n);

}  // namespace ember::quant
