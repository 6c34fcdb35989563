#include "quant/gguf_packed.h"

#include <cstring>

#include "core/check.h"
#include "core/huge_pages.h"
#include "core/isa.h"
#include "core/thread_pool.h"
#include "quant/gguf_blocks.h"
#include "quant/gguf_dot.h"
#include "quant/gguf_type_entries.h"

namespace ember::quant {
namespace {

// Bytes of a packed matrix: whole 16-row groups of `blocks_per_row` packed blocks.
int64_t GroupedBytes(int64_t rows, int64_t blocks_per_row, int64_t block_bytes) {
  return (rows + kPackRows - 1) / kPackRows * blocks_per_row * block_bytes;
}

// Packing runs at load time over every packed matrix: groups are split over the pool. For each
// group and block, the packed block is zeroed (so padding rows have d = 0 and contribute
// nothing) and fn(dst, c, src) is called for every real row c with the file's block `src`.
template <class Block, class Fn>
void PackGroups(const QuantMatrix& w, GgmlType type, int64_t packed_block_bytes, uint8_t* out, const Fn& fn) {
  EMBER_CHECK(w.type == type && w.cols % Block::kElements == 0, "Pack: type {} (want {}) cols {}",
              static_cast<int>(w.type), static_cast<int>(type), w.cols);
  const int64_t nb = w.cols / Block::kElements;
  const int64_t groups = (w.rows + kPackRows - 1) / kPackRows;
  const auto* data = static_cast<const uint8_t*>(w.data);
  ThreadPool::Global().ParallelFor(groups, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* dst = out + (g * nb + b) * packed_block_bytes;
        std::memset(dst, 0, packed_block_bytes);
        for (int c = 0; c < kPackRows && g * kPackRows + c < w.rows; ++c) {
          Block block;
          std::memcpy(&block, data + (g * kPackRows + c) * w.row_bytes + b * static_cast<int64_t>(sizeof(Block)),
                      sizeof(block));
          fn(dst, c, block);
        }
      }
    }
  }, 16);
}

// The shared nibble layout: byte 4c + e of vector t (64 bytes each) holds row c's elements
// 8t + e (low nibble) and 8t + 4 + e (high nibble) of a 32-element run, q(l) its low four bits.
template <class Q>
void PutNibbles(uint8_t* vectors, int c, const Q& q) {
  for (int t = 0; t < 4; ++t) {
    for (int e = 0; e < 4; ++e) {
      vectors[64 * t + 4 * c + e] = static_cast<uint8_t>((q(8 * t + e) & 0x0f) | (q(8 * t + 4 + e) & 0x0f) << 4);
    }
  }
}

// Element e of a Q4_0 / Q4_1 / Q5_0 block's qs: low nibbles are elements 0-15, high 16-31.
int LegacyNibble(const uint8_t* qs, int e) { return (qs[e % 16] >> (e < 16 ? 0 : 4)) & 0x0f; }

void PutF16(uint8_t* dst, int c, uint16_t v) { std::memcpy(dst + 2 * c, &v, sizeof(v)); }

// Row c's fifth bits of a 32-element run (bit l of `bits` for element l) into the eight u64
// masks at p: bit 4c + e of mask j is element 4j + e's.
void PutFifthBits(uint8_t* p, int c, uint32_t bits) {
  for (int j = 0; j < 8; ++j) {
    uint64_t mask;
    std::memcpy(&mask, p + 8 * j, sizeof(mask));
    mask |= static_cast<uint64_t>((bits >> (4 * j)) & 0x0f) << (4 * c);
    std::memcpy(p + 8 * j, &mask, sizeof(mask));
  }
}

}  // namespace

int64_t PackedQ4_0Bytes(int64_t rows, int64_t cols) { return GroupedBytes(rows, cols / kQK, kPackedQ4_0BlockBytes); }

void PackQ4_0(const QuantMatrix& w, uint8_t* out) {
  PackGroups<BlockQ4_0>(w, GgmlType::kQ4_0, kPackedQ4_0BlockBytes, out, [](uint8_t* dst, int c, const BlockQ4_0& b) {
    PutF16(dst, c, b.d);
    PutNibbles(dst + 32, c, [&](int e) { return LegacyNibble(b.qs, e); });
  });
}

int64_t PackedQ4_1Bytes(int64_t rows, int64_t cols) { return GroupedBytes(rows, cols / kQK, kPackedQ4_1BlockBytes); }

void PackQ4_1(const QuantMatrix& w, uint8_t* out) {
  PackGroups<BlockQ4_1>(w, GgmlType::kQ4_1, kPackedQ4_1BlockBytes, out, [](uint8_t* dst, int c, const BlockQ4_1& b) {
    PutF16(dst, c, b.d);
    PutF16(dst + 32, c, b.m);
    PutNibbles(dst + 64, c, [&](int e) { return LegacyNibble(b.qs, e); });
  });
}

int64_t PackedQ5_0Bytes(int64_t rows, int64_t cols) { return GroupedBytes(rows, cols / kQK, kPackedQ5_0BlockBytes); }

void PackQ5_0(const QuantMatrix& w, uint8_t* out) {
  PackGroups<BlockQ5_0>(w, GgmlType::kQ5_0, kPackedQ5_0BlockBytes, out, [](uint8_t* dst, int c, const BlockQ5_0& b) {
    uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof(qh));
    PutF16(dst, c, b.d);
    PutNibbles(dst + 32, c, [&](int e) { return LegacyNibble(b.qs, e); });
    PutFifthBits(dst + 288, c, qh);
  });
}

int64_t PackedQ5_1Bytes(int64_t rows, int64_t cols) { return GroupedBytes(rows, cols / kQK, kPackedQ5_1BlockBytes); }

void PackQ5_1(const QuantMatrix& w, uint8_t* out) {
  PackGroups<BlockQ5_1>(w, GgmlType::kQ5_1, kPackedQ5_1BlockBytes, out, [](uint8_t* dst, int c, const BlockQ5_1& b) {
    uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof(qh));
    PutF16(dst, c, b.d);
    PutF16(dst + 32, c, b.m);
    PutNibbles(dst + 64, c, [&](int e) { return LegacyNibble(b.qs, e); });
    PutFifthBits(dst + 320, c, qh);
  });
}

int64_t PackedQ8_0Bytes(int64_t rows, int64_t cols) { return GroupedBytes(rows, cols / kQK, kPackedQ8_0BlockBytes); }

void PackQ8_0(const QuantMatrix& w, uint8_t* out) {
  PackGroups<BlockQ8_0>(w, GgmlType::kQ8_0, kPackedQ8_0BlockBytes, out, [](uint8_t* dst, int c, const BlockQ8_0& b) {
    PutF16(dst, c, b.d);
    for (int j = 0; j < 8; ++j) {
      for (int e = 0; e < 4; ++e) dst[32 + 64 * j + 4 * c + e] = static_cast<uint8_t>(b.qs[4 * j + e]) ^ 0x80;
    }
  });
}

int64_t PackedActivationExtraBytesQ8_0(int64_t k) { return k / kQK * 4; }

void ExtendQ8_0Activation(uint8_t* row, int64_t k) {
  const int64_t nb = k / kQK;
  uint8_t* sums = row + Q8_0BlockSumsOffset(nb) + nb * static_cast<int64_t>(sizeof(Q8_0BlockSum));
  for (int64_t b = 0; b < nb; ++b) {
    const auto* qs = reinterpret_cast<const int8_t*>(row + b * static_cast<int64_t>(sizeof(BlockQ8_0)) + 2);
    int32_t sum = 0;
    for (int e = 0; e < kQK; ++e) sum += qs[e];
    const int32_t offset = -128 * sum;
    std::memcpy(sums + 4 * b, &offset, sizeof(offset));
  }
}

int64_t PackedQ4_KBytes(int64_t rows, int64_t cols) { return GroupedBytes(rows, cols / kQKK, kPackedQ4_KBlockBytes); }

// Row c's Q4_K layout of a super-block (f16 d and dmin, the unpacked scales and mins, the
// nibbles): all of a packed Q4_K block, and the first kPackedQ4_KBlockBytes of a Q5_K one.
template <typename Block>
void PutQ4_KPart(uint8_t* dst, int c, const Block& b) {
  uint8_t scales[8], mins[8];
  UnpackQ4KScales(b.scales, scales, mins);
  PutF16(dst, c, b.d);
  PutF16(dst + 32, c, b.dmin);
  for (int sb = 0; sb < 8; ++sb) {
    dst[64 + 16 * sb + c] = scales[sb];
    dst[192 + 16 * sb + c] = mins[sb];
    // Element 32 sb + l is nibble sb % 2 of qs[32 (sb / 2) + l].
    PutNibbles(dst + 320 + 256 * sb, c, [&](int l) { return b.qs[32 * (sb / 2) + l] >> (4 * (sb % 2)); });
  }
}

void PackQ4_K(const QuantMatrix& w, uint8_t* out) {
  PackGroups<BlockQ4_K>(w, GgmlType::kQ4_K, kPackedQ4_KBlockBytes, out, &PutQ4_KPart<BlockQ4_K>);
}

int64_t PackedQ5_KBytes(int64_t rows, int64_t cols) { return GroupedBytes(rows, cols / kQKK, kPackedQ5_KBlockBytes); }

void PackQ5_K(const QuantMatrix& w, uint8_t* out) {
  PackGroups<BlockQ5_K>(w, GgmlType::kQ5_K, kPackedQ5_KBlockBytes, out, [](uint8_t* dst, int c, const BlockQ5_K& b) {
    PutQ4_KPart(dst, c, b);
    for (int sb = 0; sb < 8; ++sb) {
      // Bit 4 of element 32 sb + l is bit sb of qh[l].
      uint32_t bits = 0;
      for (int l = 0; l < 32; ++l) bits |= static_cast<uint32_t>((b.qh[l] >> sb) & 1) << l;
      PutFifthBits(dst + kPackedQ4_KBlockBytes + 64 * sb, c, bits);
    }
  });
}

int64_t PackedQ6_KBytes(int64_t rows, int64_t cols) { return GroupedBytes(rows, cols / kQKK, kPackedQ6_KBlockBytes); }

void PackQ6_K(const QuantMatrix& w, uint8_t* out) {
  PackGroups<BlockQ6_K>(w, GgmlType::kQ6_K, kPackedQ6_KBlockBytes, out, [](uint8_t* dst, int c, const BlockQ6_K& b) {
    // The 6-bit q of element e = 128 h + r (gguf_blocks.h).
    auto q = [&](int e) {
      const int h = e / 128, r = e % 128;
      const int low = (b.ql[64 * h + r % 64] >> (r < 64 ? 0 : 4)) & 0x0f;
      return low | ((b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3) << 4;
    };
    PutF16(dst, c, b.d);
    for (int g = 0; g < 16; ++g) dst[32 + 32 * (g / 2) + 2 * c + g % 2] = static_cast<uint8_t>(b.scales[g]);
    for (int sb = 0; sb < 8; ++sb) {
      uint8_t* sub = dst + 288 + 384 * sb;
      PutNibbles(sub, c, [&](int l) { return q(32 * sb + l); });
      for (int u = 0; u < 2; ++u) {
        for (int e = 0; e < 4; ++e) {
          uint8_t top = 0;
          for (int s = 0; s < 4; ++s) top |= static_cast<uint8_t>((q(32 * sb + 4 * (4 * u + s) + e) >> 4) << (2 * s));
          sub[256 + 64 * u + 4 * c + e] = top;
        }
      }
    }
  });
}

std::shared_ptr<const void> PackQuantMatrix(const QuantMatrix& w) {
  // Only GgufMatMul's avx512 and amx paths, and avx2's for the types it has tiles for, read the
  // copy: anywhere else (EMBER_ISA=ref, a K-quant under avx2) it would be memory held for nothing.
  const GgufTypeKernels* kernels = FindGgufKernels(w.type);
  if (kernels == nullptr || kernels->packed == nullptr || w.rows == 0 || w.cols == 0) return nullptr;
  const Isa isa = ActiveIsa();
  if (isa < Isa::kAvx2 || (isa == Isa::kAvx2 && kernels->packed->rows_avx2 == nullptr)) return nullptr;
  std::shared_ptr<uint8_t> packed = AllocateOnHugePages(static_cast<size_t>(kernels->packed->bytes(w.rows, w.cols)));
  kernels->packed->pack(w, packed.get());
  return packed;
}

namespace entries {
constinit const GgufPackedForm kPackedQ4_0 = {&PackedQ4_0Bytes, &PackQ4_0, &PackedRowsQ4_0Avx512, &PackedRowsQ4_0Amx, kAmxMinRows,
                                              nullptr, nullptr, &PackedRowsQ4_0Avx2};
constinit const GgufPackedForm kPackedQ4_1 = {&PackedQ4_1Bytes, &PackQ4_1, &PackedRowsQ4_1Avx512, &PackedRowsQ4_1Amx, kAmxMinRows,
                                              nullptr, nullptr, &PackedRowsQ4_1Avx2};
constinit const GgufPackedForm kPackedQ5_0 = {&PackedQ5_0Bytes, &PackQ5_0, &PackedRowsQ5_0Avx512, &PackedRowsQ5_0Amx, kAmxMinRows,
                                              nullptr, nullptr, &PackedRowsQ5_0Avx2};
constinit const GgufPackedForm kPackedQ5_1 = {&PackedQ5_1Bytes, &PackQ5_1, &PackedRowsQ5_1Avx512, &PackedRowsQ5_1Amx, kAmxMinRows,
                                              nullptr, nullptr, &PackedRowsQ5_1Avx2};
constinit const GgufPackedForm kPackedQ8_0 = {&PackedQ8_0Bytes, &PackQ8_0, &PackedRowsQ8_0Avx512, &PackedRowsQ8_0Amx, kAmxMinRows,
                                              &PackedActivationExtraBytesQ8_0, &ExtendQ8_0Activation, &PackedRowsQ8_0Avx2};
constinit const GgufPackedForm kPackedQ4_K = {&PackedQ4_KBytes, &PackQ4_K, &PackedRowsQ4_KAvx512, &PackedRowsQ4_KAmx, kAmxMinRows};
constinit const GgufPackedForm kPackedQ5_K = {&PackedQ5_KBytes, &PackQ5_K, &PackedRowsQ5_KAvx512, &PackedRowsQ5_KAmx, kAmxMinRows};
constinit const GgufPackedForm kPackedQ6_K = {&PackedQ6_KBytes, &PackQ6_K, &PackedRowsQ6_KAvx512, &PackedRowsQ6_KAmx, kAmxMinRowsQ6_K};
}  // namespace entries

}  // namespace ember::quant
