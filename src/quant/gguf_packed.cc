#include "quant/gguf_packed.h"

#include <cstring>

#include "core/check.h"
#include "core/isa.h"
#include "core/thread_pool.h"
#include "quant/gguf_blocks.h"
#include "quant/gguf_type_entries.h"

namespace ember::quant {
namespace {

// Packing runs at load time over every Q5_0 / Q4_K matrix: groups are split over the pool.
template <class Fn>
void ParallelGroups(int64_t groups, const Fn& fn) {
  ThreadPool::Global().ParallelFor(groups, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) fn(g);
  }, 16);
}

}  // namespace

int64_t PackedQ5_0Bytes(int64_t rows, int64_t cols) {
  return (rows + kPackRows - 1) / kPackRows * (cols / kQK) * kPackedBlockBytes;
}

void PackQ5_0(const QuantMatrix& w, uint8_t* out) {
  EMBER_CHECK(w.type == GgmlType::kQ5_0 && w.cols % kQK == 0, "PackQ5_0: type {} cols {}",
              static_cast<int>(w.type), w.cols);
  const int64_t nb = w.cols / kQK;
  const int64_t groups = (w.rows + kPackRows - 1) / kPackRows;
  const auto* data = static_cast<const uint8_t*>(w.data);
  ParallelGroups(groups, [&](int64_t g) {
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
        // Low four bits of element e: low nibbles are elements 0-15, high nibbles 16-31.
        auto q = [&](int e) { return (block.qs[e % 16] >> (e < 16 ? 0 : 4)) & 0x0f; };
        std::memcpy(dst + 2 * c, &block.d, sizeof(block.d));
        for (int t = 0; t < 4; ++t) {
          for (int e = 0; e < 4; ++e) {
            dst[32 + 64 * t + 4 * c + e] = static_cast<uint8_t>(q(8 * t + e) | (q(8 * t + 4 + e) << 4));
          }
        }
        for (int j = 0; j < 8; ++j) masks[j] |= static_cast<uint64_t>((qh >> (4 * j)) & 0x0f) << (4 * c);
      }
      std::memcpy(dst + 288, masks, sizeof(masks));
    }
  });
}

int64_t PackedQ4_KBytes(int64_t rows, int64_t cols) {
  return (rows + kPackRows - 1) / kPackRows * (cols / kQKK) * kPackedQ4_KBlockBytes;
}

void PackQ4_K(const QuantMatrix& w, uint8_t* out) {
  EMBER_CHECK(w.type == GgmlType::kQ4_K && w.cols % kQKK == 0, "PackQ4_K: type {} cols {}",
              static_cast<int>(w.type), w.cols);
  const int64_t nb = w.cols / kQKK;
  const int64_t groups = (w.rows + kPackRows - 1) / kPackRows;
  const auto* data = static_cast<const uint8_t*>(w.data);
  ParallelGroups(groups, [&](int64_t g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* dst = out + (g * nb + b) * kPackedQ4_KBlockBytes;
      std::memset(dst, 0, kPackedQ4_KBlockBytes);
      for (int c = 0; c < kPackRows; ++c) {
        const int64_t row = g * kPackRows + c;
        if (row >= w.rows) break;  // padding rows stay zero (d = dmin = 0)
        BlockQ4_K block;
        std::memcpy(&block, data + row * w.row_bytes + b * static_cast<int64_t>(sizeof(BlockQ4_K)), sizeof(block));
        uint8_t scales[8], mins[8];
        UnpackQ4KScales(block.scales, scales, mins);
        std::memcpy(dst + 2 * c, &block.d, sizeof(block.d));
        std::memcpy(dst + 32 + 2 * c, &block.dmin, sizeof(block.dmin));
        for (int sb = 0; sb < 8; ++sb) {
          dst[64 + 16 * sb + c] = scales[sb];
          dst[192 + 16 * sb + c] = mins[sb];
          // Element 32 sb + l is nibble sb % 2 of qs[32 (sb / 2) + l].
          auto q = [&](int l) { return (block.qs[32 * (sb / 2) + l] >> (4 * (sb % 2))) & 0x0f; };
          for (int t = 0; t < 4; ++t) {
            for (int e = 0; e < 4; ++e) {
              dst[320 + 256 * sb + 64 * t + 4 * c + e] = static_cast<uint8_t>(q(8 * t + e) | (q(8 * t + 4 + e) << 4));
            }
          }
        }
      }
    }
  });
}

std::shared_ptr<const void> PackQuantMatrix(const QuantMatrix& w) {
  // Only GgufMatMul's avx512 path reads the copy: under EMBER_ISA=avx2 (or ref) it would be
  // memory held for nothing.
  const GgufTypeKernels* kernels = FindGgufKernels(w.type);
  if (ActiveIsa() != Isa::kAvx512 || kernels == nullptr || kernels->packed == nullptr || w.rows == 0 || w.cols == 0) {
    return nullptr;
  }
  std::shared_ptr<uint8_t[]> packed(new uint8_t[kernels->packed->bytes(w.rows, w.cols)]);
  kernels->packed->pack(w, packed.get());
  return std::shared_ptr<const void>(packed, packed.get());
}

namespace entries {
constinit const GgufPackedForm kPackedQ5_0 = {&PackedQ5_0Bytes, &PackQ5_0, &PackedRowsQ5_0Avx512};
constinit const GgufPackedForm kPackedQ4_K = {&PackedQ4_KBytes, &PackQ4_K, &PackedRowsQ4_KAvx512};
}  // namespace entries

}  // namespace ember::quant
