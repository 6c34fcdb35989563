// Packing of FP4 block-scaled matrices into 16-row groups and the packed GEMM's activation
// records (block_scaled_packed.h). Portable: the layouts are what the AVX-512 GEMM reads.
#include "quant/block_scaled_packed.h"

#include <cstring>

#include "core/check.h"
#include "core/huge_pages.h"
#include "quant/block_scaled_dot.h"

namespace ember::quant {

int64_t PackedFp4GroupBytes(WeightFormat format, int64_t k) {
  return kPackedGroupRows * (k / 2 + k / KBlockSize(format));
}

int64_t PackedFp4Bytes(WeightFormat format, int64_t rows, int64_t k) {
  return (rows + kPackedGroupRows - 1) / kPackedGroupRows * PackedFp4GroupBytes(format, k);
}

PackedBuffer PackFp4Matrix(const BlockScaledMatrix& w) {
  if (!FormatTraits(w.format).int8_activations || w.rows == 0 || w.cols == 0) return nullptr;
  const int64_t k = w.cols;
  const int64_t chunks = k / kChunk;
  const int64_t words = k / 8;  // 4 code bytes (8 elements) per word
  const int64_t blocks = k / KBlockSize(w.format);
  const int64_t group_bytes = PackedFp4GroupBytes(w.format, k);
  const int64_t groups = (w.rows + kPackedGroupRows - 1) / kPackedGroupRows;
  const size_t bytes = static_cast<size_t>((groups * group_bytes + 63) / 64 * 64);
  PackedBuffer out = AllocateOnHugePages(bytes);
  std::memset(out.get(), 0, bytes);
  const auto* scales = static_cast<const uint8_t*>(w.scales);
  for (int64_t g = 0; g < groups; ++g) {
    uint8_t* group = out.get() + g * group_bytes;
    for (int64_t o = 0; o < kPackedGroupRows; ++o) {
      const int64_t row = g * kPackedGroupRows + o;
      if (row >= w.rows) break;
      const uint8_t* codes = w.codes + row * w.codes_row_stride;
      // Word (c, j) of a whole chunk goes to slot (p = j / 2, c, jj = j % 2); tail words follow.
      for (int64_t word = 0; word < words; ++word) {
        int64_t slot;
        if (word < chunks * 16) {
          const int64_t c = word / 16, j = word % 16;
          slot = ((j / 2) * chunks + c) * 2 + j % 2;
        } else {
          slot = word;  // the tail words keep their order after the 16 * chunks whole-chunk slots
        }
        std::memcpy(group + slot * 64 + o * 4, codes + word * 4, 4);
      }
      const uint8_t* row_scales = scales + row * w.scales_row_stride;
      for (int64_t b = 0; b < blocks; ++b) group[8 * k + b * kPackedGroupRows + o] = row_scales[b];
    }
  }
  return out;
}

PackedBuffer MaybePackBlockScaledMatrix(const BlockScaledMatrix& w) {
  if (ActiveBlockDotVariant().PackedFor(w.format) == nullptr) return nullptr;
  return PackFp4Matrix(w);
}

void FillPackedActivationRecords(int64_t k, uint8_t* act) {
  const ActivationLayout l = Int8ActivationLayout(k);
  const auto* q = reinterpret_cast<const int8_t*>(act + l.q);
  const int64_t chunks = k / kChunk;
  for (int64_t group = 0; group < k / 16; ++group) {
    // 16-element group G = c * 8 + p of a whole chunk sits at record p * chunks + c; tail groups
    // keep their order after the 8 * chunks whole-chunk records.
    const int64_t record = group < chunks * 8 ? (group % 8) * chunks + group / 8 : group;
    uint8_t* r = act + l.packed + record * 32;
    const int8_t* e = q + group * 16;
    int32_t sums[2] = {0, 0};
    for (int half = 0; half < 2; ++half) {
      for (int i = 0; i < 4; ++i) {
        r[half * 8 + i] = static_cast<uint8_t>(e[half * 8 + 2 * i]);
        r[half * 8 + 4 + i] = static_cast<uint8_t>(e[half * 8 + 2 * i + 1]);
      }
      for (int i = 0; i < 8; ++i) sums[half] += e[half * 8 + i];
    }
    const int32_t fix[3] = {-12 * sums[0], -12 * sums[1], -12 * (sums[0] + sums[1])};
    std::memcpy(r + 16, &fix[0], 4);
    std::memcpy(r + 20, &fix[1], 4);
    std::memcpy(r + 24, act + l.scale + group * 4, 4);
    std::memcpy(r + 28, &fix[2], 4);
  }
}

}  // namespace ember::quant
