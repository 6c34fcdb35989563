// The packed GEMMs (gguf_packed.h) with AMX tiles, bit for bit the avx512 tiles' results.
//
// Each output's f32 sequence (gguf_packed.h) is a chain over blocks of one integer per block (per
// sub-block or 16-element group for the K-quants) times scales. The integers are exact however
// they are summed, so the tiles compute them: per 32-element run (16 for Q6_K's groups) one
// tdpbsud (signed activation bytes x unsigned weight bytes; tdpbssd for Q8_0's signed weights)
// of a 16-row activation tile against the group's 16 weight rows gives the 16 x 16 int32 dots.
// Stored to a scratch tile, an epilogue per activation row then applies the very operations the
// avx512 tile does, on the same values in the same order (one conversion, one scale product, the
// FMAs; the K-quants' integer scale products and vpdpwssd min / offset sums), so the bits are the
// avx512 ones. The epilogue, not the tiles, is the cost: per row and block 3-4 vector
// instructions for 16 x 32 multiply-adds, against the avx512 tile's ~12.
//
// Per 16-row weight group the packed blocks are unpacked once into the tiles' operands
// (gguf_packed_operands.h); then each 16-row activation tile passes over them, kChunkRuns runs
// at a time: the products of the next chunk are issued before the epilogue of this one, so the
// tile unit works while the vector units apply scales. Activation tiles are loaded straight from
// the quantized rows (stride act_bytes): the A operand of run b is the block's 32 quants.
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/amx_tiles.h"
#include "core/check.h"
#include "quant/gguf_packed.h"
#include "quant/gguf_packed_operands.h"

namespace ember::quant {
namespace {

constexpr __mmask16 kAll = 0xffff;
constexpr int64_t kQ8_0BlockBytes = 34;
constexpr int64_t kQ8_KBlockBytes = 292;  // f32 d, 256 quants, 16 int16 bsums
constexpr int64_t kCTileBytes = 1024;     // 16 x 16 int32
static_assert(kAmxTileRows == 16);

// Tiles 0-3 hold results, 4 and 5 activations, 6 and 7 weights. Consecutive runs cycle through
// four result tiles (a product's result is ready ~50 cycles after its loads, and its store must
// finish before the tile is zeroed for another: with two, that chain was what the GEMM waited on)
// and alternate between the two operand pairs.
constexpr AmxTileConfig Config(int run_bytes) {
  AmxTileConfig c;
  for (int t = 0; t < 4; ++t) c.Tile(t, kAmxTileRows, 64);
  for (int t = 0; t < 2; ++t) {
    c.Tile(4 + t, kAmxTileRows, run_bytes);
    c.Tile(6 + t, run_bytes / 4, 64);
  }
  return c;
}
constexpr AmxTileConfig kRuns32 = Config(32);
constexpr AmxTileConfig kRuns16 = Config(16);

// A thread's operand buffer, grown to the largest group it has unpacked.
class Scratch {
 public:
  ~Scratch() { std::free(data_); }
  uint8_t* Get(int64_t bytes) {
    if (bytes > capacity_) {
      std::free(data_);
      capacity_ = (bytes + 63) / 64 * 64;
      data_ = static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>(capacity_)));
      EMBER_CHECK(data_ != nullptr, "AMX GEMM: no memory for {} operand bytes", capacity_);
    }
    return data_;
  }

 private:
  uint8_t* data_ = nullptr;
  int64_t capacity_ = 0;
};

int32_t Load32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
float LoadF32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// One run's 16 x 16 int32 products into result tile c: activations a (16 rows act_bytes apart),
// weights the B tile at w; and the store of result tile c. GCC's tile intrinsics paste their tile
// numbers into the assembly, so they must be literals: one copy per tile.
#define EMBER_AMX_PRODUCT(name, c, a, b)                                             \
  template <bool kSignedWeights>                                                    \
  void name(const uint8_t* act, int64_t act_bytes, const uint8_t* w) {              \
    _tile_zero(c);                                                                  \
    _tile_loadd(a, act, act_bytes);                                                 \
    _tile_loadd(b, w, 64);                                                          \
    if constexpr (kSignedWeights) {                                                 \
      _tile_dpbssd(c, a, b);                                                        \
    } else {                                                                        \
      _tile_dpbsud(c, a, b);                                                        \
    }                                                                               \
  }
EMBER_AMX_PRODUCT(Product0, 0, 4, 6)
EMBER_AMX_PRODUCT(Product1, 1, 5, 7)
EMBER_AMX_PRODUCT(Product2, 2, 4, 6)
EMBER_AMX_PRODUCT(Product3, 3, 5, 7)
#undef EMBER_AMX_PRODUCT

void StoreResult(int tile, uint8_t* out) {
  switch (tile) {
    case 0: _tile_stored(0, out, 64); break;
    case 1: _tile_stored(1, out, 64); break;
    case 2: _tile_stored(2, out, 64); break;
    default: _tile_stored(3, out, 64); break;
  }
}

// The products of one chunk of runs: run.a(t) / run.w(t) are run t's activation and weight
// operands, its result goes to c + t * kCTileBytes. They are issued a few at a time between the
// epilogue rows of the chunk before (Until), not in one burst that would stall the vector work
// behind it, and over the first rows only, so that every result is stored before the next chunk's
// first row reads it. Each result is stored kStoreDelay products after its own: a store waits for
// its product (~50 cycles), and the tile instructions behind a waiting store wait too (measured:
// storing at once cost ~15% of a Q5_0 GEMM).
template <bool kSignedWeights, class Run>
class Pending {
 public:
  Pending(const Run& run, int count, int64_t act_bytes, uint8_t* c)
      : run_(run), count_(count), act_bytes_(act_bytes), c_(c) {}
  // Before epilogue row r of `rows`: the products due by then, spread over rows [0, rows - 2).
  void Until(int r, int rows) {
    const int span = rows > 2 ? rows - 2 : 1;
    while (issued_ < count_ && issued_ * span <= r * count_) Issue();
    if (r >= span) Flush();
  }
  void All() {
    while (issued_ < count_) Issue();
    Flush();
  }

 private:
  // Result tiles cycle through four, so a result must be stored before the fourth product after it.
  static constexpr int kStoreDelay = 2;

  void Issue() {
    const int t = issued_++;
    const uint8_t* a = run_.a(t);
    const uint8_t* w = run_.w(t);
    switch (t & 3) {
      case 0: Product0<kSignedWeights>(a, act_bytes_, w); break;
      case 1: Product1<kSignedWeights>(a, act_bytes_, w); break;
      case 2: Product2<kSignedWeights>(a, act_bytes_, w); break;
      default: Product3<kSignedWeights>(a, act_bytes_, w); break;
    }
    if (issued_ - stored_ > kStoreDelay) Store();
  }
  void Store() {
    StoreResult(stored_ & 3, c_ + stored_ * kCTileBytes);
    ++stored_;
  }
  void Flush() {
    while (stored_ < issued_) Store();
  }

  Run run_;
  int count_;
  int64_t act_bytes_;
  uint8_t* c_;
  int issued_ = 0;
  int stored_ = 0;
};

// Row r's int32 results of run t.
__m512i Result(const uint8_t* c, int t, int r) { return _mm512_load_si512(c + t * kCTileBytes + 64 * r); }

enum class Legacy { kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0 };

// One activation tile (`rows` valid rows of 16) against one unpacked group of a 32-element type:
// TileLegacy's and TileQ8_0's sequences (gguf_packed_avx512.cc), kChunkRuns blocks per chunk
// with their scales held in registers across the rows.
template <Legacy kType>
void TileLegacy(const uint8_t* ops, int64_t nb, const uint8_t* act, int rows, int64_t act_bytes, float* y,
                int64_t ldy, int cols) {
  constexpr bool kMin = kType == Legacy::kQ4_1 || kType == Legacy::kQ5_1;
  constexpr bool kQ8 = kType == Legacy::kQ8_0;
  constexpr int kChunkRuns = 8;
  alignas(64) float acc[kAmxTileRows][16], second[kAmxTileRows][16];
  alignas(64) uint8_t c[2][kChunkRuns * kCTileBytes];
  std::memset(acc, 0, sizeof(acc));
  std::memset(second, 0, sizeof(second));
  struct Run {
    const uint8_t* act;
    const uint8_t* ops;
    const uint8_t* a(int t) const { return act + t * kQ8_0BlockBytes + 2; }
    const uint8_t* w(int t) const { return ops + t * kLegacyOperandBytes; }
  };
  const int64_t chunks = (nb + kChunkRuns - 1) / kChunkRuns;
  const auto runs = [&](int64_t chunk) { return static_cast<int>(std::min<int64_t>(kChunkRuns, nb - chunk * kChunkRuns)); };
  const auto pending = [&](int64_t chunk) {
    const int64_t b0 = chunk * kChunkRuns;
    return Pending<kQ8, Run>(Run{act + b0 * kQ8_0BlockBytes, ops + b0 * kLegacyOperandBytes}, runs(chunk), act_bytes,
                             c[chunk & 1]);
  };
  const uint8_t* sums[kAmxTileRows];
  for (int r = 0; r < rows; ++r) sums[r] = act + r * act_bytes + (nb * kQ8_0BlockBytes + 7) / 8 * 8;
  pending(0).All();
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    auto next = chunk + 1 < chunks ? pending(chunk + 1) : Pending<kQ8, Run>(Run{}, 0, act_bytes, nullptr);
    const int64_t b0 = chunk * kChunkRuns;
    const int count = runs(chunk);
    const uint8_t* results = c[chunk & 1];
    __m512 d[kChunkRuns], dm[kChunkRuns];
#pragma GCC unroll 8
    for (int t = 0; t < kChunkRuns; ++t) {
      d[t] = t < count ? _mm512_load_ps(ops + (b0 + t) * kLegacyOperandBytes + 512) : _mm512_setzero_ps();
      dm[t] = t < count ? _mm512_load_ps(ops + (b0 + t) * kLegacyOperandBytes + 576) : _mm512_setzero_ps();
    }
    for (int r = 0; r < rows; ++r) {
      next.Until(r, rows);
      __m512 a = _mm512_load_ps(acc[r]);
      __m512 s = _mm512_load_ps(second[r]);
      const uint8_t* bs = sums[r] + 8 * b0;  // Q8_0BlockSum {da, da * sum(a)} per block
#pragma GCC unroll 8
      for (int t = 0; t < kChunkRuns; ++t) {
        if (t >= count) break;
        a = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, Result(results, t, r)),
                            _mm512_mul_ps(d[t], _mm512_set1_ps(LoadF32(bs + 8 * t))), a);
        if constexpr (!kQ8) s = _mm512_fmadd_ps(dm[t], _mm512_set1_ps(LoadF32(bs + 8 * t + 4)), s);
      }
      _mm512_store_ps(acc[r], a);
      _mm512_store_ps(second[r], s);
    }
    next.All();
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1);
  for (int r = 0; r < rows; ++r) {
    const __m512 a = _mm512_load_ps(acc[r]);
    __m512 out = a;
    if constexpr (kMin) {
      out = _mm512_add_ps(a, _mm512_load_ps(second[r]));
    } else if constexpr (!kQ8) {
      const __m512 offset = _mm512_set1_ps(kType == Legacy::kQ4_0 ? -8.0f : -16.0f);
      out = _mm512_fmadd_ps(_mm512_load_ps(second[r]), offset, a);
    }
    _mm512_mask_storeu_ps(y + r * ldy, mask, out);
  }
}

// The runs of a super-block: 8 sub-blocks of 32 (Q4_K, Q5_K), or 16 groups of 16 (Q6_K: group
// t = 2 s + u is sub-block s's quants [16 u, 16 u + 16), rows [4 u, 4 u + 4) of its B tile).
template <int kRunElements>
struct SuperBlockRun {
  const uint8_t* act;  // the super-block's Q8_K block in activation row 0
  const uint8_t* ops;  // its unpacked operands
  const uint8_t* a(int t) const { return act + 4 + kRunElements * t; }
  const uint8_t* w(int t) const { return ops + kBTileBytes * kRunElements / 32 * t; }
};

// Q4_K / Q5_K: TileQ45_K's sequence, one super-block (eight sub-block products) per chunk.
void TileQ45_K(const uint8_t* ops, int64_t nb, const uint8_t* act, int rows, int64_t act_bytes, float* y, int64_t ldy,
               int cols) {
  using Run = SuperBlockRun<32>;
  alignas(64) float acc[kAmxTileRows][16], acc_min[kAmxTileRows][16];
  alignas(64) uint8_t c[2][8 * kCTileBytes];
  std::memset(acc, 0, sizeof(acc));
  std::memset(acc_min, 0, sizeof(acc_min));
  const auto pending = [&](int64_t b) {
    return Pending<false, Run>(Run{act + b * kQ8_KBlockBytes, ops + b * kQ45_KOperandBytes}, 8, act_bytes, c[b & 1]);
  };
  pending(0).All();
  for (int64_t b = 0; b < nb; ++b) {
    auto next = b + 1 < nb ? pending(b + 1) : Pending<false, Run>(Run{}, 0, act_bytes, nullptr);
    const uint8_t* o = ops + b * kQ45_KOperandBytes;
    const uint8_t* results = c[b & 1];
    __m512i scale[8], min_pair[8];
    for (int sb = 0; sb < 8; ++sb) {
      scale[sb] = _mm512_load_si512(o + 4224 + 64 * sb);
      min_pair[sb] = _mm512_load_si512(o + 4736 + 64 * sb);
    }
    const __m512 d = _mm512_load_ps(o + 4096);
    const __m512 dmin = _mm512_load_ps(o + 4160);
    for (int r = 0; r < rows; ++r) {
      next.Until(r, rows);
      const uint8_t* a = act + r * act_bytes + b * kQ8_KBlockBytes;
      __m512i sumi = _mm512_setzero_si512(), summin = _mm512_setzero_si512();
      for (int sb = 0; sb < 8; ++sb) {
        sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(Result(results, sb, r), scale[sb]));
        summin = _mm512_dpwssd_epi32(summin, min_pair[sb], _mm512_set1_epi32(Load32(a + 260 + 4 * sb)));
      }
      const __m512 da = _mm512_set1_ps(LoadF32(a));
      _mm512_store_ps(acc[r], _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, sumi), _mm512_mul_ps(d, da), _mm512_load_ps(acc[r])));
      _mm512_store_ps(acc_min[r], _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, summin), _mm512_mul_ps(dmin, da),
                                                  _mm512_load_ps(acc_min[r])));
    }
    next.All();
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1);
  for (int r = 0; r < rows; ++r) {
    _mm512_mask_storeu_ps(y + r * ldy, mask, _mm512_sub_ps(_mm512_load_ps(acc[r]), _mm512_load_ps(acc_min[r])));
  }
}

// Q6_K: TileQ6_K's sequence; sixteen 16-element group products per super-block.
void TileQ6_K(const uint8_t* ops, int64_t nb, const uint8_t* act, int rows, int64_t act_bytes, float* y, int64_t ldy,
              int cols) {
  using Run = SuperBlockRun<16>;
  alignas(64) float acc[kAmxTileRows][16];
  alignas(64) uint8_t c[2][16 * kCTileBytes];
  std::memset(acc, 0, sizeof(acc));
  const auto pending = [&](int64_t b) {
    return Pending<false, Run>(Run{act + b * kQ8_KBlockBytes, ops + b * kQ6_KOperandBytes}, 16, act_bytes, c[b & 1]);
  };
  pending(0).All();
  for (int64_t b = 0; b < nb; ++b) {
    auto next = b + 1 < nb ? pending(b + 1) : Pending<false, Run>(Run{}, 0, act_bytes, nullptr);
    const uint8_t* o = ops + b * kQ6_KOperandBytes;
    const uint8_t* results = c[b & 1];
    __m512i pair[8];
    for (int sb = 0; sb < 8; ++sb) pair[sb] = _mm512_load_si512(o + 5184 + 64 * sb);
    const __m512 d = _mm512_load_ps(o + 4096);
    for (int r = 0; r < rows; ++r) {
      next.Until(r, rows);
      const uint8_t* a = act + r * act_bytes + b * kQ8_KBlockBytes;
      __m512i sumi = _mm512_setzero_si512(), offset = _mm512_setzero_si512();
      for (int sb = 0; sb < 8; ++sb) {
        const __m512i lo = _mm512_mullo_epi32(Result(results, 2 * sb, r), _mm512_load_si512(o + 4160 + 64 * sb));
        const __m512i hi = _mm512_mullo_epi32(Result(results, 2 * sb + 1, r), _mm512_load_si512(o + 4672 + 64 * sb));
        sumi = _mm512_add_epi32(sumi, _mm512_add_epi32(lo, hi));
        offset = _mm512_dpwssd_epi32(offset, pair[sb], _mm512_set1_epi32(Load32(a + 260 + 4 * sb)));
      }
      const __m512 da = _mm512_set1_ps(LoadF32(a));
      const __m512i total = _mm512_sub_epi32(sumi, _mm512_maskz_slli_epi32(kAll, offset, 5));
      _mm512_store_ps(acc[r], _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, total), _mm512_mul_ps(d, da), _mm512_load_ps(acc[r])));
    }
    next.All();
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1);
  for (int r = 0; r < rows; ++r) _mm512_mask_storeu_ps(y + r * ldy, mask, _mm512_load_ps(acc[r]));
}

using UnpackFn = void (*)(const uint8_t* group, int64_t nb, uint8_t* operands);
using TileFn = void (*)(const uint8_t* ops, int64_t nb, const uint8_t* act, int rows, int64_t act_bytes, float* y,
                        int64_t ldy, int cols);

// A type's pieces: its packed and unpacked block sizes, elements per block, the unpacker, the
// tile and the tile shapes.
struct Form {
  int64_t packed_block_bytes;
  int64_t operand_bytes;
  int64_t block_elements;
  UnpackFn unpack;
  TileFn tile;
  const AmxTileConfig* config;
};

// Groups [group_begin, group_end): each one's operands unpacked, then every activation tile
// against them. (Unpacking 2 or 4 groups per pass, so that an activation tile's quants stay in L1
// across them, measured no faster.) The tiles are this thread's for the call only (AmxTileScope).
void Groups(const Form& f, const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end,
            const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {
  thread_local Scratch scratch;
  const int64_t nb = k / f.block_elements;
  uint8_t* ops = scratch.Get(nb * f.operand_bytes);
  const AmxTileScope tiles(*f.config);
  for (int64_t g = group_begin; g < group_end; ++g) {
    f.unpack(packed + g * nb * f.packed_block_bytes, nb, ops);
    const int cols = static_cast<int>(std::min<int64_t>(kPackRows, n - g * kPackRows));
    for (int64_t i = 0; i < m; i += kAmxTileRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kAmxTileRows, m - i));
      f.tile(ops, nb, act + i * act_bytes, rows, act_bytes, y + i * n + g * kPackRows, n, cols);
    }
  }
}

const Form kQ4_0 = {kPackedQ4_0BlockBytes, kLegacyOperandBytes, 32, &UnpackGroupQ4_0Avx512,
                    &TileLegacy<Legacy::kQ4_0>, &kRuns32};
const Form kQ4_1 = {kPackedQ4_1BlockBytes, kLegacyOperandBytes, 32, &UnpackGroupQ4_1Avx512,
                    &TileLegacy<Legacy::kQ4_1>, &kRuns32};
const Form kQ5_0 = {kPackedQ5_0BlockBytes, kLegacyOperandBytes, 32, &UnpackGroupQ5_0Avx512,
                    &TileLegacy<Legacy::kQ5_0>, &kRuns32};
const Form kQ5_1 = {kPackedQ5_1BlockBytes, kLegacyOperandBytes, 32, &UnpackGroupQ5_1Avx512,
                    &TileLegacy<Legacy::kQ5_1>, &kRuns32};
const Form kQ8_0 = {kPackedQ8_0BlockBytes, kLegacyOperandBytes, 32, &UnpackGroupQ8_0Avx512,
                    &TileLegacy<Legacy::kQ8_0>, &kRuns32};
const Form kQ4_K = {kPackedQ4_KBlockBytes, kQ45_KOperandBytes, 256, &UnpackGroupQ4_KAvx512, &TileQ45_K, &kRuns32};
const Form kQ5_K = {kPackedQ5_KBlockBytes, kQ45_KOperandBytes, 256, &UnpackGroupQ5_KAvx512, &TileQ45_K, &kRuns32};
const Form kQ6_K = {kPackedQ6_KBlockBytes, kQ6_KOperandBytes, 256, &UnpackGroupQ6_KAvx512, &TileQ6_K, &kRuns16};

}  // namespace

// The entry points gguf_packed.h declares, one per type.
#define EMBER_PACKED_ROWS_AMX(Type)                                                                          \
  void PackedRows##Type##Amx(const uint8_t* packed, int64_t n, int64_t k, int64_t group_begin, int64_t group_end, \
                             const uint8_t* act, int64_t m, int64_t act_bytes, float* y) {                      \
    Groups(k##Type, packed, n, k, group_begin, group_end, act, m, act_bytes, y);                                \
  }
EMBER_PACKED_ROWS_AMX(Q4_0)
EMBER_PACKED_ROWS_AMX(Q4_1)
EMBER_PACKED_ROWS_AMX(Q5_0)
EMBER_PACKED_ROWS_AMX(Q5_1)
EMBER_PACKED_ROWS_AMX(Q8_0)
EMBER_PACKED_ROWS_AMX(Q4_K)
EMBER_PACKED_ROWS_AMX(Q5_K)
EMBER_PACKED_ROWS_AMX(Q6_K)
#undef EMBER_PACKED_ROWS_AMX

}  // namespace ember::quant
