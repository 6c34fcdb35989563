#include "quant/block_scaled.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/int_math.h"
#include "quant/block_scaled_packed.h"

namespace ember::quant {
namespace {


float LoadF32(const void* base, int64_t byte_offset) {
  float v;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + byte_offset, sizeof(v));
  return v;
}

// The f32 factor every element of block (row, k) is multiplied by, before the global scale.
float BlockScale(const BlockScaledMatrix& w, int64_t row, int64_t k) {
  const auto* scales = static_cast<const uint8_t*>(w.scales);
  switch (w.format) {
    case WeightFormat::kMxfp4:
      return E8m0ToFloat(scales[row * w.scales_row_stride + k / kMxfp4BlockSize]);
    case WeightFormat::kNvfp4:
      return E4m3ToFloat(scales[row * w.scales_row_stride + k / kNvfp4BlockSize]);
    case WeightFormat::kFp8E4m3:
      switch (w.fp8_scale_kind) {
        case Fp8ScaleKind::kPerTensor:
          return 1.0f;
        case Fp8ScaleKind::kPerChannel:
          return LoadF32(w.scales, row * w.scales_row_stride);
        case Fp8ScaleKind::kBlock128:
          return LoadF32(w.scales, (row / kFp8ScaleBlock) * w.scales_row_stride + (k / kFp8ScaleBlock) * 4);
      }
  }
  return 0.0f;
}

constexpr WeightFormatTraits kFormats[] = {
    {WeightFormat::kMxfp4, "mxfp4", kMxfp4BlockSize, 2, 1, true},
    {WeightFormat::kNvfp4, "nvfp4", kNvfp4BlockSize, 2, 1, true},
    {WeightFormat::kFp8E4m3, "fp8", 1, 1, 0, false},
};
static_assert(std::size(kFormats) == kWeightFormatCount);

}  // namespace

const WeightFormatTraits& FormatTraits(WeightFormat format) {
  const auto index = static_cast<size_t>(format);
  EMBER_CHECK(index < std::size(kFormats) && kFormats[index].format == format, "weight format {}", index);
  return kFormats[index];
}

std::string_view WeightFormatName(WeightFormat format) { return FormatTraits(format).name; }

std::string_view Fp8ScaleKindName(Fp8ScaleKind kind) {
  switch (kind) {
    case Fp8ScaleKind::kPerTensor:
      return "per-tensor";
    case Fp8ScaleKind::kPerChannel:
      return "per-channel";
    case Fp8ScaleKind::kBlock128:
      return "block128";
  }
  return "?";
}

uint8_t FloatToE8m0(float amax, int emax_elem) {
  if (!std::isfinite(amax)) return 0xff;
  // floor(log2 |amax|) as a biased exponent (0 for amax 0: the smallest scale).
  const int code = F32ToE8M0(std::fabs(amax), E8M0Rounding::kFloor);
  return static_cast<uint8_t>(std::clamp(code - emax_elem, 0, 0xfe));
}

std::string_view Mxfp4ScaleRoundingName(Mxfp4ScaleRounding rounding) {
  return rounding == Mxfp4ScaleRounding::kFloor ? "floor" : "even";
}

uint8_t Mxfp4ScaleCode(float amax, Mxfp4ScaleRounding rounding) {
  if (rounding == Mxfp4ScaleRounding::kFloor || !std::isfinite(amax)) return FloatToE8m0(amax);
  // Biased exponent of |amax| rounded to one mantissa bit (the carry at mantissa 0.75 bumps it).
  const uint32_t bits = std::bit_cast<uint32_t>(std::fabs(amax));
  const int exponent = static_cast<int>(((bits + (1u << 21)) >> 23) & 0xff);
  // Rounded past the largest finite f32: Quark's log2 gives inf, clamped to 2^127 (code 0xfe).
  // Zero and subnormals give exponent 0 (or 1) and clamp to code 0, the smallest scale, as in Quark.
  if (exponent == 0xff) return 0xfe;
  return static_cast<uint8_t>(std::max(exponent - kE2m1Emax, 0));
}

int64_t KBlockSize(WeightFormat format) { return FormatTraits(format).k_block; }

int64_t CodesRowBytes(WeightFormat format, int64_t cols) { return cols / FormatTraits(format).codes_per_byte; }

int64_t ScalesRowBytes(WeightFormat format, int64_t cols) {
  const WeightFormatTraits& traits = FormatTraits(format);
  return cols / traits.k_block * traits.scale_bytes_per_block;
}

int64_t Fp8ScaleCount(Fp8ScaleKind kind, int64_t rows, int64_t cols) {
  switch (kind) {
    case Fp8ScaleKind::kPerTensor:
      return 0;
    case Fp8ScaleKind::kPerChannel:
      return rows;
    case Fp8ScaleKind::kBlock128:
      return CeilDiv(rows, kFp8ScaleBlock) * CeilDiv(cols, kFp8ScaleBlock);
  }
  return 0;
}

int64_t BlockScaledMatrix::PackedBytes() const {
  const int64_t scale_bytes = format == WeightFormat::kFp8E4m3 ? 4 * Fp8ScaleCount(fp8_scale_kind, rows, cols)
                                                               : rows * ScalesRowBytes(format, cols);
  return rows * CodesRowBytes(format, cols) + scale_bytes;
}

BlockScaledMatrix DenseBlockScaledMatrix(WeightFormat format, int64_t rows, int64_t cols, const uint8_t* codes,
                                         const void* scales, float global_scale, Fp8ScaleKind fp8_scale_kind) {
  BlockScaledMatrix w;
  w.format = format;
  w.rows = rows;
  w.cols = cols;
  w.codes = codes;
  w.codes_row_stride = CodesRowBytes(format, cols);
  w.scales = scales;
  w.global_scale = global_scale;
  w.fp8_scale_kind = fp8_scale_kind;
  if (format != WeightFormat::kFp8E4m3) {
    w.scales_row_stride = ScalesRowBytes(format, cols);
  } else if (fp8_scale_kind == Fp8ScaleKind::kPerChannel) {
    w.scales_row_stride = 4;
  } else if (fp8_scale_kind == Fp8ScaleKind::kBlock128) {
    w.scales_row_stride = 4 * CeilDiv(cols, kFp8ScaleBlock);
  }
  return w;
}

Expected<BlockScaledMatrix> SliceRows(const BlockScaledMatrix& w, int64_t row_begin, int64_t rows) {
  if (row_begin < 0 || rows < 0 || row_begin + rows > w.rows) {
    return InvalidArgument(fmt::format("rows [{}, {}) are outside a {} matrix of {} rows", row_begin, row_begin + rows,
                                       WeightFormatName(w.format), w.rows));
  }
  BlockScaledMatrix slice = w;
  slice.rows = rows;
  slice.codes = w.codes + row_begin * w.codes_row_stride;
  if (w.format != WeightFormat::kFp8E4m3 || w.fp8_scale_kind == Fp8ScaleKind::kPerChannel) {
    slice.scales = static_cast<const uint8_t*>(w.scales) + row_begin * w.scales_row_stride;
  } else if (w.fp8_scale_kind == Fp8ScaleKind::kBlock128) {
    if (row_begin % kFp8ScaleBlock != 0) {
      return InvalidArgument(fmt::format("fp8 rows from {} do not start a 128x128 scale block", row_begin));
    }
    slice.scales = static_cast<const uint8_t*>(w.scales) + row_begin / kFp8ScaleBlock * w.scales_row_stride;
  }
  // A packed copy serves the slice only from a group boundary on.
  slice.packed = w.packed != nullptr && row_begin % kPackedGroupRows == 0
                     ? w.packed + row_begin / kPackedGroupRows * PackedFp4GroupBytes(w.format, w.cols)
                     : nullptr;
  return slice;
}

Status ValidateBlockScaledMatrix(const BlockScaledMatrix& w) {
  const std::string_view name = WeightFormatName(w.format);
  if (w.rows < 0 || w.cols < 0) {
    return InvalidArgument(fmt::format("{} matrix has a negative shape [{}, {}]", name, w.rows, w.cols));
  }
  const int64_t k_multiple = w.format == WeightFormat::kFp8E4m3 ? 16 : KBlockSize(w.format);
  if (w.cols % k_multiple != 0) {
    return InvalidArgument(
        fmt::format("{} matrix [{}, {}]: the input dimension must be a multiple of {} ({}); pad the checkpoint or "
                    "keep this tensor in bf16",
                    name, w.rows, w.cols, k_multiple,
                    w.format == WeightFormat::kFp8E4m3 ? "the kernels' vector width" : "the scale block"));
  }
  if (w.rows == 0 || w.cols == 0) return Status::Ok();
  if (w.codes == nullptr) return InvalidArgument(fmt::format("{} matrix has no codes", name));
  if (w.codes_row_stride < CodesRowBytes(w.format, w.cols)) {
    return InvalidArgument(fmt::format("{} matrix: codes row stride {} is shorter than a row of {} bytes", name,
                                       w.codes_row_stride, CodesRowBytes(w.format, w.cols)));
  }
  const bool needs_scales = w.format != WeightFormat::kFp8E4m3 || w.fp8_scale_kind != Fp8ScaleKind::kPerTensor;
  if (needs_scales && w.scales == nullptr) {
    return InvalidArgument(fmt::format("{} matrix has no scales", name));
  }
  int64_t min_scale_stride = 0;
  if (w.format != WeightFormat::kFp8E4m3) {
    min_scale_stride = ScalesRowBytes(w.format, w.cols);
  } else if (w.fp8_scale_kind == Fp8ScaleKind::kPerChannel) {
    min_scale_stride = 4;
  } else if (w.fp8_scale_kind == Fp8ScaleKind::kBlock128) {
    min_scale_stride = 4 * CeilDiv(w.cols, kFp8ScaleBlock);
  }
  if (w.scales_row_stride < min_scale_stride) {
    return InvalidArgument(fmt::format("{} matrix: scales row stride {} is shorter than a row of {} bytes", name,
                                       w.scales_row_stride, min_scale_stride));
  }
  if (w.format == WeightFormat::kFp8E4m3 && needs_scales &&
      (reinterpret_cast<uintptr_t>(w.scales) % 4 != 0 || w.scales_row_stride % 4 != 0)) {
    return InvalidArgument(fmt::format("fp8 matrix: f32 scales must be 4-byte aligned (copy the scale tensor)"));
  }
  if (!std::isfinite(w.global_scale)) {
    return InvalidArgument(fmt::format("{} matrix: global scale {} is not finite", name, w.global_scale));
  }
  return Status::Ok();
}

void DequantizeRow(const BlockScaledMatrix& w, int64_t row, float* out) {
  EMBER_CHECK(row >= 0 && row < w.rows, "row {} of {}", row, w.rows);
  const uint8_t* codes = w.codes + row * w.codes_row_stride;
  for (int64_t k = 0; k < w.cols; ++k) {
    const float element =
        w.format == WeightFormat::kFp8E4m3 ? E4m3ToFloat(codes[k]) : E2m1ToFloat((codes[k / 2] >> (4 * (k % 2))) & 0xf);
    out[k] = element * (BlockScale(w, row, k) * w.global_scale);
  }
}

float AbsMax(const float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

namespace {

// e2m1 code of a value already divided by its block scale, with ModelOpt's sign rule (x < 0): -0
// encodes as +0, as nvidia-modelopt's encoder does, so that converted checkpoints match its bytes.
uint8_t EncodeElement(float v) { return static_cast<uint8_t>(FloatToE2m1(std::fabs(v)) | (v < 0.0f ? 0x8 : 0x0)); }

// Quark's MXFP4 sign rule: its element quantizer returns +0 for anything that rounds to zero, so
// only a non-zero magnitude carries the sign (its packer copies the f32 sign bit).
uint8_t EncodeMxfp4Element(float v) {
  const uint8_t magnitude = FloatToE2m1(std::fabs(v));
  return static_cast<uint8_t>(magnitude | (v < 0.0f && magnitude != 0 ? 0x8 : 0x0));
}

Status CheckQuantizeShape(std::string_view name, int64_t rows, int64_t cols, int64_t block) {
  if (rows < 0 || cols < 0 || cols % block != 0) {
    return InvalidArgument(
        fmt::format("cannot quantize a [{}, {}] matrix to {}: the input dimension must be a multiple of {}", rows, cols,
                    name, block));
  }
  return Status::Ok();
}

}  // namespace

Status QuantizeMxfp4(const float* x, int64_t rows, int64_t cols, uint8_t* codes, uint8_t* scales,
                     Mxfp4ScaleRounding rounding) {
  EMBER_RETURN_IF_ERROR(CheckQuantizeShape("mxfp4", rows, cols, kMxfp4BlockSize));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / kMxfp4BlockSize; ++b) {
      const float* block = x + r * cols + b * kMxfp4BlockSize;
      const uint8_t e = Mxfp4ScaleCode(AbsMax(block, kMxfp4BlockSize), rounding);
      scales[r * (cols / kMxfp4BlockSize) + b] = e;
      const float scale = E8m0ToFloat(e);
      uint8_t* out = codes + r * (cols / 2) + b * (kMxfp4BlockSize / 2);
      for (int64_t i = 0; i < kMxfp4BlockSize; i += 2) {
        out[i / 2] =
            static_cast<uint8_t>(EncodeMxfp4Element(block[i] / scale) | EncodeMxfp4Element(block[i + 1] / scale) << 4);
      }
    }
  }
  return Status::Ok();
}

float Nvfp4GlobalScale(float amax) {
  // ModelOpt divides by this 0 for an all-zero tensor and writes NaN scales; 1 keeps the codes 0.
  return amax > 0.0f ? amax / (kE2m1Max * kE4m3Max) : 1.0f;
}

Status QuantizeNvfp4(const float* x, int64_t rows, int64_t cols, float weight_scale_2, uint8_t* codes,
                     uint8_t* scales) {
  EMBER_RETURN_IF_ERROR(CheckQuantizeShape("nvfp4", rows, cols, kNvfp4BlockSize));
  if (!(weight_scale_2 > 0.0f) || !std::isfinite(weight_scale_2)) {
    return InvalidArgument(
        fmt::format("nvfp4 global scale {} must be positive and finite (amax / 2688 of a "
                    "tensor that is not all zero)",
                    weight_scale_2));
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / kNvfp4BlockSize; ++b) {
      const float* block = x + r * cols + b * kNvfp4BlockSize;
      float scale = AbsMax(block, kNvfp4BlockSize) / (kE2m1Max * weight_scale_2);
      if (scale == 0.0f) scale = 1.0f;
      scale = std::clamp(scale, 1.0f / 512.0f, kE4m3Max);
      const uint8_t s = FloatToE4m3(scale);
      scales[r * (cols / kNvfp4BlockSize) + b] = s;
      const float divisor = E4m3ToFloat(s) * weight_scale_2;
      uint8_t* out = codes + r * (cols / 2) + b * (kNvfp4BlockSize / 2);
      for (int64_t i = 0; i < kNvfp4BlockSize; i += 2) {
        out[i / 2] =
            static_cast<uint8_t>(EncodeElement(block[i] / divisor) | EncodeElement(block[i + 1] / divisor) << 4);
      }
    }
  }
  return Status::Ok();
}

Status QuantizeFp8(const float* x, int64_t rows, int64_t cols, Fp8ScaleKind kind, uint8_t* codes, float* scales,
                   float* global_scale) {
  EMBER_RETURN_IF_ERROR(CheckQuantizeShape("fp8", rows, cols, 16));
  auto scale_for = [](float amax) { return amax > 0.0f ? amax / kE4m3Max : 1.0f; };
  // Quantizes the sub-matrix [r0, r1) x [k0, k1) with one scale.
  auto quantize = [&](int64_t r0, int64_t r1, int64_t k0, int64_t k1, float scale) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t k = k0; k < k1; ++k) codes[r * cols + k] = FloatToE4m3(x[r * cols + k] / scale);
    }
  };
  *global_scale = 1.0f;
  switch (kind) {
    case Fp8ScaleKind::kPerTensor:
      *global_scale = scale_for(AbsMax(x, rows * cols));
      quantize(0, rows, 0, cols, *global_scale);
      break;
    case Fp8ScaleKind::kPerChannel:
      for (int64_t r = 0; r < rows; ++r) {
        scales[r] = scale_for(AbsMax(x + r * cols, cols));
        quantize(r, r + 1, 0, cols, scales[r]);
      }
      break;
    case Fp8ScaleKind::kBlock128: {
      const int64_t block_cols = CeilDiv(cols, kFp8ScaleBlock);
      for (int64_t br = 0; br < CeilDiv(rows, kFp8ScaleBlock); ++br) {
        for (int64_t bc = 0; bc < block_cols; ++bc) {
          const int64_t r0 = br * kFp8ScaleBlock, r1 = std::min(rows, r0 + kFp8ScaleBlock);
          const int64_t k0 = bc * kFp8ScaleBlock, k1 = std::min(cols, k0 + kFp8ScaleBlock);
          float amax = 0.0f;
          for (int64_t r = r0; r < r1; ++r) amax = std::max(amax, AbsMax(x + r * cols + k0, k1 - k0));
          scales[br * block_cols + bc] = scale_for(amax);
          quantize(r0, r1, k0, k1, scales[br * block_cols + bc]);
        }
      }
      break;
    }
  }
  return Status::Ok();
}

}  // namespace ember::quant
