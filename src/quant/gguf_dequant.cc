#include "quant/gguf_dequant.h"

#include <cmath>
#include <cstring>
#include <string>

#include "core/dtypes.h"
#include "quant/gguf_type_entries.h"

// Every expression below is written as gguf-py evaluates it in numpy: one f32 rounding per
// operation, in the same order, and no fused multiply-add (the file is built for baseline x86-64,
// and ISO C++ mode keeps GCC from contracting a * b + c), so results match it bit for bit.

namespace ember::quant {
namespace {

template <typename Block>
const Block* Blocks(const void* row) {
  return static_cast<const Block*>(row);
}

void DequantQ4_0(const BlockQ4_0* blocks, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = F16ToF32(blocks[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = d * static_cast<float>((blocks[i].qs[j] & 0x0f) - 8);
      y[j + kQK / 2] = d * static_cast<float>((blocks[i].qs[j] >> 4) - 8);
    }
  }
}

void DequantQ4_1(const BlockQ4_1* blocks, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = F16ToF32(blocks[i].d);
    const float m = F16ToF32(blocks[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = d * static_cast<float>(blocks[i].qs[j] & 0x0f) + m;
      y[j + kQK / 2] = d * static_cast<float>(blocks[i].qs[j] >> 4) + m;
    }
  }
}

// Bit 4 of each of the 32 quants of a Q5 block.
uint32_t Q5HighBits(const uint8_t qh[4]) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));  // little-endian, as GGUF stores it
  return bits;
}

void DequantQ5_0(const BlockQ5_0* blocks, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = F16ToF32(blocks[i].d);
    const uint32_t qh = Q5HighBits(blocks[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (blocks[i].qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (blocks[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      y[j] = d * static_cast<float>(lo - 16);
      y[j + kQK / 2] = d * static_cast<float>(hi - 16);
    }
  }
}

void DequantQ5_1(const BlockQ5_1* blocks, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = F16ToF32(blocks[i].d);
    const float m = F16ToF32(blocks[i].m);
    const uint32_t qh = Q5HighBits(blocks[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (blocks[i].qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (blocks[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      y[j] = d * static_cast<float>(lo) + m;
      y[j + kQK / 2] = d * static_cast<float>(hi) + m;
    }
  }
}

template <typename Block>
void DequantQ8(const Block* blocks, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = F16ToF32(blocks[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(blocks[i].qs[j]) * d;
  }
}

void DequantQ2_K(const BlockQ2_K* blocks, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = F16ToF32(blocks[i].d);
    const float dmin = F16ToF32(blocks[i].dmin);
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, t = (e % 128) / 32, l = e % 32;
      const uint8_t sc = blocks[i].scales[e / 16];
      const float dl = d * static_cast<float>(sc & 0x0f);
      const float ml = dmin * static_cast<float>(sc >> 4);
      const int q = (blocks[i].qs[32 * h + l] >> (2 * t)) & 3;
      y[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

void DequantQ3_K(const BlockQ3_K* blocks, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = F16ToF32(blocks[i].d);
    const uint8_t* packed = blocks[i].scales;
    // Scale j: low 4 bits from byte j % 8 (low nibble for j < 8), high 2 bits from byte
    // 8 + j % 4 at bit 2 * (j / 4); stored with a bias of 32.
    int scales[16];
    for (int j = 0; j < 16; ++j) {
      const int low = (j < 8 ? packed[j] : packed[j - 8] >> 4) & 0x0f;
      const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
      scales[j] = (low | (high << 4)) - 32;
    }
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, t = (e % 128) / 32, l = e % 32;
      const float dl = d * static_cast<float>(scales[e / 16]);
      const int low = (blocks[i].qs[32 * h + l] >> (2 * t)) & 3;
      const bool high_set = (blocks[i].hmask[l] >> (e / 32)) & 1;
      y[e] = dl * static_cast<float>(low - (high_set ? 0 : 4));
    }
  }
}

// Q4_K and Q5_K share everything except where bit 4 comes from (nothing for Q4_K).
template <typename Block, bool kHasHighBit>
void DequantQ45_K(const Block* blocks, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = F16ToF32(blocks[i].d);
    const float dmin = F16ToF32(blocks[i].dmin);
    uint8_t scales[8], mins[8];
    UnpackQ4KScales(blocks[i].scales, scales, mins);
    for (int s = 0; s < 8; ++s) {
      const float d1 = d * static_cast<float>(scales[s]);
      const float m1 = dmin * static_cast<float>(mins[s]);
      const int c = s / 2, shift = 4 * (s % 2);
      for (int l = 0; l < 32; ++l) {
        int q = (blocks[i].qs[32 * c + l] >> shift) & 0x0f;
        if constexpr (kHasHighBit) q |= ((blocks[i].qh[l] >> s) & 1) << 4;
        y[32 * s + l] = d1 * static_cast<float>(q) - m1;
      }
    }
  }
}

void DequantQ6_K(const BlockQ6_K* blocks, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = F16ToF32(blocks[i].d);
    for (int e = 0; e < kQKK; ++e) {
      const int h = e / 128, r = e % 128;
      const uint8_t low_byte = blocks[i].ql[64 * h + r % 64];
      const int low = (r < 64 ? low_byte : low_byte >> 4) & 0x0f;
      const int high = (blocks[i].qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
      const float d1 = d * static_cast<float>(blocks[i].scales[e / 16]);
      y[e] = d1 * static_cast<float>((low | (high << 4)) - 32);
    }
  }
}

void DequantQ8_K(const BlockQ8_K* blocks, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    for (int j = 0; j < kQKK; ++j) y[j] = blocks[i].d * static_cast<float>(blocks[i].qs[j]);
  }
}

// x * (1 / d) rounded half away from zero, as gguf-py's np_roundf and ggml's roundf do.
int8_t RoundToInt8(float x, float inverse_scale) {
  const float r = std::round(x * inverse_scale);
  if (!(r == r)) return 0;  // NaN input: any value is as wrong; avoid the undefined cast
  return static_cast<int8_t>(r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r));
}

}  // namespace

namespace entries {

void DequantizeF32(const void* row, int64_t n, float* out) {
  if (n > 0) std::memcpy(out, row, static_cast<size_t>(n) * sizeof(float));
}
void DequantizeF16(const void* row, int64_t n, float* out) {
  const auto* h = static_cast<const uint16_t*>(row);
  for (int64_t i = 0; i < n; ++i) out[i] = F16ToF32(h[i]);
}
void DequantizeBF16(const void* row, int64_t n, float* out) {
  const auto* b = static_cast<const uint16_t*>(row);
  for (int64_t i = 0; i < n; ++i) out[i] = BF16ToF32(b[i]);
}
void DequantizeQ4_0(const void* row, int64_t nb, float* out) { DequantQ4_0(Blocks<BlockQ4_0>(row), nb, out); }
void DequantizeQ4_1(const void* row, int64_t nb, float* out) { DequantQ4_1(Blocks<BlockQ4_1>(row), nb, out); }
void DequantizeQ5_0(const void* row, int64_t nb, float* out) { DequantQ5_0(Blocks<BlockQ5_0>(row), nb, out); }
void DequantizeQ5_1(const void* row, int64_t nb, float* out) { DequantQ5_1(Blocks<BlockQ5_1>(row), nb, out); }
void DequantizeQ8_0(const void* row, int64_t nb, float* out) { DequantQ8(Blocks<BlockQ8_0>(row), nb, out); }
void DequantizeQ8_1(const void* row, int64_t nb, float* out) { DequantQ8(Blocks<BlockQ8_1>(row), nb, out); }
void DequantizeQ2_K(const void* row, int64_t nb, float* out) { DequantQ2_K(Blocks<BlockQ2_K>(row), nb, out); }
void DequantizeQ3_K(const void* row, int64_t nb, float* out) { DequantQ3_K(Blocks<BlockQ3_K>(row), nb, out); }
void DequantizeQ4_K(const void* row, int64_t nb, float* out) {
  DequantQ45_K<BlockQ4_K, false>(Blocks<BlockQ4_K>(row), nb, out);
}
void DequantizeQ5_K(const void* row, int64_t nb, float* out) {
  DequantQ45_K<BlockQ5_K, true>(Blocks<BlockQ5_K>(row), nb, out);
}
void DequantizeQ6_K(const void* row, int64_t nb, float* out) { DequantQ6_K(Blocks<BlockQ6_K>(row), nb, out); }
void DequantizeQ8_K(const void* row, int64_t nb, float* out) { DequantQ8_K(Blocks<BlockQ8_K>(row), nb, out); }

}  // namespace entries

bool CanDequantize(GgmlType type) {
  const GgufTypeKernels* kernels = FindGgufKernels(type);
  return kernels != nullptr && kernels->dequantize != nullptr;
}

Status DequantizeRow(GgmlType type, const void* row, int64_t n, float* out) {
  const GgmlTypeTraits* traits = FindGgmlType(type);
  const GgufTypeKernels* kernels = FindGgufKernels(type);
  if (traits == nullptr || kernels == nullptr || kernels->dequantize == nullptr) {
    return Unimplemented("DequantizeRow: no dequantizer for GGML type " +
                         std::to_string(static_cast<uint32_t>(type)) +
                         (traits != nullptr ? " (" + std::string(traits->name) + ")" : ""));
  }
  if (n < 0 || n % traits->block_elements != 0) {
    return InvalidArgument("DequantizeRow: " + std::to_string(n) + " elements is not a whole number of " +
                           std::string(traits->name) + " blocks of " +
                           std::to_string(traits->block_elements));
  }
  kernels->dequantize(row, n / traits->block_elements, out);
  return Status::Ok();
}

void QuantizeRowQ8_0(const float* x, int64_t n, BlockQ8_0* out) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[i].d = F32ToF16(d);
    for (int j = 0; j < kQK; ++j) out[i].qs[j] = RoundToInt8(x[j], id);
  }
}

void QuantizeRowQ8_K(const float* x, int64_t n, BlockQ8_K* out) {
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
    float amax = 0.0f;
    for (int j = 0; j < kQKK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[i].d = d;
    for (int j = 0; j < kQKK; ++j) out[i].qs[j] = RoundToInt8(x[j], id);
    for (int g = 0; g < kQKK / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += out[i].qs[16 * g + j];
      out[i].bsums[g] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace ember::quant
