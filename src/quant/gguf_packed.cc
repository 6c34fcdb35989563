#include "quant/gguf_packed.h"

#include <cstring>

#include "core/check.h"
#include "core/cpu_features.h"
#include "quant/gguf_blocks.h"

namespace ember::quant {

int64_t PackedQ5_0Bytes(int64_t rows, int64_t cols) {
  return (rows + kPackRows - 1) / kPackRows * (cols / kQK) * kPackedBlockBytes;
}

void PackQ5_0(const QuantMatrix& w, uint8_t* out) {
  EMBER_CHECK(w.type == GgmlType::kQ5_0 && w.cols % kQK == 0, "PackQ5_0: type {} cols {}",
              static_cast<int>(w.type), w.cols);
  const int64_t nb = w.cols / kQK;
  const int64_t groups = (w.rows + kPackRows - 1) / kPackRows;
  const auto* data = static_cast<const uint8_t*>(w.data);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* dst = out + (g * nb + b) * kPackedBlockBytes;
      std::memset(dst, 0, kPackedBlockBytes);
      uint64_t masks[8] = {};
      for (int c = 0; c < kPackRows; ++c) {
        const int64_t row = g * kPackRows + c;
        if (row >= w.rows) break;  // padding rows stay zero (d = 0)
        BlockQ5_0 block;
        std::memcpy(&block, data + row * w.row_bytes + b * static_cast<int64_t>(sizeof(BlockQ5_0)), sizeof(block));
        uint32_t qh;
        std::memcpy(&qh, block.qh, sizeof(qh));
        uint8_t q[kQK];  // element order: low nibbles are elements 0-15, high nibbles 16-31
        for (int e = 0; e < kQK; ++e) {
          q[e] = static_cast<uint8_t>(((block.qs[e % 16] >> (e < 16 ? 0 : 4)) & 0x0f) | (((qh >> e) & 1u) << 4));
        }
        std::memcpy(dst + 2 * c, &block.d, sizeof(block.d));
        for (int t = 0; t < 4; ++t) {
          for (int e = 0; e < 4; ++e) {
            dst[32 + 64 * t + 4 * c + e] = static_cast<uint8_t>((q[8 * t + e] & 0x0f) | ((q[8 * t + 4 + e] & 0x0f) << 4));
          }
        }
        for (int j = 0; j < 8; ++j) {
          for (int e = 0; e < 4; ++e) masks[j] |= static_cast<uint64_t>(q[4 * j + e] >> 4) << (4 * c + e);
        }
      }
      std::memcpy(dst + 288, masks, sizeof(masks));
    }
  }
}

std::shared_ptr<const void> PackQuantMatrix(const QuantMatrix& w) {
  if (w.type != GgmlType::kQ5_0 || !HostCpuFeatures().HasAvx512Set() || w.rows == 0 || w.cols == 0) return nullptr;
  std::shared_ptr<uint8_t[]> packed(new uint8_t[PackedQ5_0Bytes(w.rows, w.cols)]);
  PackQ5_0(w, packed.get());
  return std::shared_ptr<const void>(packed, packed.get());
}

}  // namespace ember::quant
