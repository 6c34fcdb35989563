// The loop nest shared by the cpu/ matmul variants (generic, avx2, avx512).
//
// A variant supplies only a register-tile kernel, Kernel::Tile<W, R>, that computes the
// W x R block y[i + r, j + c] (c < W weight rows, r < R activation rows) as full dot products
// over k. This header decides which tiles to run and in what order:
//
//   decode (m == 1):  a GEMV. Weight rows stream from memory exactly once, kGemvW rows per
//                     tile so that many independent loads and FMA chains are in flight.
//   prefill (m > 1):  activation rows are cut into panels of `mc` rows sized to stay in L2;
//                     for each panel the kTileW-row weight block is read from memory/L3 once
//                     and reused by every kTileR-row activation tile of the panel.
//   packed prefill:   (kernels with kPackWeights, m >= 2 * kPackR) as above, but the weight
//                     block is first widened to f32, kBlockK columns at a time, into an
//                     L1-resident buffer. The bf16 -> f32 widening then costs once per panel
//                     instead of once per activation tile, which is what limits the plain
//                     tile loop (it competes with the FMAs for the same ports). Partial sums
//                     live in a small per-panel buffer between k blocks; storing and reloading
//                     a vector accumulator is exact, so the operation sequence per element is
//                     unchanged.
//
// Determinism contract. Every Tile<W, R> and PackedTile<W, R> instantiation must compute each
// output element with the same sequence of floating-point operations, which depends on k
// only: one vector accumulator per element, k walked in vector-width steps from 0, the tail
// handled in the same way, then a fixed horizontal-sum tree. Tiling only changes which
// elements are computed side by side, so y[i, j] is bitwise the same however [n_begin, n_end)
// is split across threads, and also the same whether row i was computed in a batch of m rows
// or alone (prefill == decode).
//
// ODR note. This header is included from files compiled with different ISA flags. Everything
// here is a template over Kernel, and each variant defines Kernel in an unnamed namespace, so
// every instantiation has internal linkage: the linker can never substitute an AVX-512 copy
// of a function into the baseline build (which a plain inline function here would allow).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <new>
#include <type_traits>

namespace ember::kernels::cpu {

// Kernel must provide:
//   static constexpr int kTileW;   // weight rows per prefill tile (>= 1)
//   static constexpr int kTileR;   // activation rows per prefill tile (>= 1)
//   static constexpr int kGemvW;   // weight rows per decode tile (>= kTileW)
//   static constexpr int64_t kPanelBytes;  // L2 budget for one panel of activation rows
//   template <int W, int R, typename WeightT>
//   static void Tile(const float* x, int64_t k, const WeightT* w, float* y, int64_t ldy);
// where x points at activation row i (row stride k), w at weight row j (row stride k) and y at
// y[i, j] (row stride ldy). Tile is instantiated for W in [1, kTileW] and {kGemvW}, and for
// R in [1, kTileR]. Kernels with `static constexpr bool kPackWeights = true` also provide
//   static constexpr int kLanes;          // f32 lanes per vector
//   static constexpr int kPackW, kPackR;  // packed tile shape
//   static constexpr int64_t kMaxPanelRows;  // bounds the partial-sum scratch
//   static constexpr int64_t kBlockK;     // k columns per packed block (multiple of kLanes)
//   template <int W, int R>
//   static void PackedTile(const float* x, int64_t ldx, int64_t count, const float* wpack,
//                          int64_t ldw, float* acc, bool resume, float* y, int64_t ldy);
// which accumulates `count` columns of x (row stride ldx) against W packed f32 weight rows
// (row stride ldw, zero padded to a multiple of kLanes) into the W x R x kLanes partial sums
// at acc (starting from zero unless `resume`), then either stores them back to acc (y null)
// or reduces them into y. Its tail must treat the zero-padded weights like Tile's masked ones.

// Calls f.template operator()<W, R>() with the compile-time tile shape equal to (wc, rc),
// 1 <= wc <= kMaxW, 1 <= rc <= kMaxR.
template <int kMaxW, int kMaxR, int W = 1, int R = 1, typename F>
inline void WithTileShape(int wc, int rc, F&& f) {
  if constexpr (W < kMaxW) {
    if (wc != W) return WithTileShape<kMaxW, kMaxR, W + 1, R>(wc, rc, f);
  }
  if constexpr (R < kMaxR) {
    if (rc != R) return WithTileShape<kMaxW, kMaxR, W, R + 1>(wc, rc, f);
  }
  f.template operator()<W, R>();
}

template <typename Kernel, typename WeightT>
inline void DispatchWR(int wc, int rc, const float* x, int64_t k, const WeightT* w, float* y, int64_t ldy) {
  WithTileShape<Kernel::kTileW, Kernel::kTileR>(
      wc, rc, [&]<int W, int R>() { Kernel::template Tile<W, R, WeightT>(x, k, w, y, ldy); });
}

// Rows per activation panel: as many tile_rows-row tiles as fit the L2 budget, at least one.
template <typename Kernel>
inline int64_t PanelRows(int64_t k, int64_t tile_rows) {
  const int64_t row_bytes = std::max<int64_t>(1, k) * static_cast<int64_t>(sizeof(float));
  const int64_t tiles = std::max<int64_t>(1, Kernel::kPanelBytes / (row_bytes * tile_rows));
  return tiles * tile_rows;
}

template <typename Kernel>
constexpr bool KernelPacksWeights() {
  if constexpr (requires { Kernel::kPackWeights; }) {
    return Kernel::kPackWeights;
  } else {
    return false;
  }
}

// Widens `count` weights to f32 and zero-fills up to `padded` (exact: bf16 is an f32 prefix).
template <typename Kernel, typename WeightT>
void WidenRow(const WeightT* src, int64_t count, int64_t padded, float* dst) {
  int64_t i = 0;
  for (; i < count; ++i) {
    if constexpr (std::is_same_v<WeightT, uint16_t>) {
      dst[i] = std::bit_cast<float>(static_cast<uint32_t>(src[i]) << 16);
    } else {
      dst[i] = src[i];
    }
  }
  for (; i < padded; ++i) dst[i] = 0.0f;
}

// 64-byte aligned float scratch. Deliberately not std::vector: its out-of-line member functions
// compiled in an ISA-flagged file could be picked by the linker for baseline code (see above).
template <typename Kernel>
class Scratch {
 public:
  explicit Scratch(int64_t count)
      : data_(static_cast<float*>(
            ::operator new[](static_cast<size_t>(count) * sizeof(float), std::align_val_t{64}))) {}
  ~Scratch() { ::operator delete[](data_, std::align_val_t{64}); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  float* get() const { return data_; }

 private:
  float* data_;
};

// The packed prefill loop nest (see the top of this file). Scratch: kPackW x kBlockK floats of
// packed weights plus one accumulator set per tile of the panel (~70 KB for avx512).
template <typename Kernel, typename WeightT>
void PackedMatMul(const float* x, int64_t m, int64_t k, const WeightT* w, int64_t n_begin, int64_t n_end,
                  float* y, int64_t ldy) {
  constexpr int kW = Kernel::kPackW;
  constexpr int kR = Kernel::kPackR;
  constexpr int kL = Kernel::kLanes;
  constexpr int64_t kMaxTiles = Kernel::kMaxPanelRows / kR;
  static_assert(Kernel::kBlockK % kL == 0 && kMaxTiles >= 1);
  const int64_t ldw = std::min<int64_t>(Kernel::kBlockK, (k + kL - 1) / kL * kL);
  const int64_t mc = std::min<int64_t>(PanelRows<Kernel>(k, kR), kMaxTiles * kR);
  const Scratch<Kernel> wpack_storage(kW * ldw);
  const Scratch<Kernel> acc_storage(((mc + kR - 1) / kR) * kW * kR * kL);
  float* const wpack = wpack_storage.get();
  float* const acc = acc_storage.get();
  for (int64_t i0 = 0; i0 < m; i0 += mc) {
    const int64_t i_end = std::min(m, i0 + mc);
    for (int64_t j = n_begin; j < n_end; j += kW) {
      const int wc = static_cast<int>(std::min<int64_t>(kW, n_end - j));
      for (int64_t p0 = 0; p0 < k; p0 += Kernel::kBlockK) {
        const int64_t count = std::min<int64_t>(Kernel::kBlockK, k - p0);
        const int64_t padded = (count + kL - 1) / kL * kL;
        const bool last = p0 + count == k;
        for (int c = 0; c < wc; ++c) WidenRow<Kernel>(w + (j + c) * k + p0, count, padded, wpack + c * ldw);
        float* tile_acc = acc;
        for (int64_t i = i0; i < i_end; i += kR, tile_acc += kW * kR * kL) {
          const int rc = static_cast<int>(std::min<int64_t>(kR, i_end - i));
          float* y_tile = last ? y + i * ldy + j : nullptr;
          WithTileShape<kW, kR>(wc, rc, [&]<int W, int R>() {
            Kernel::template PackedTile<W, R>(x + i * k + p0, k, count, wpack, ldw, tile_acc, p0 > 0, y_tile,
                                              ldy);
          });
        }
      }
    }
  }
}

template <typename Kernel, typename WeightT>
void TiledMatMul(const float* x, int64_t m, int64_t k, const WeightT* w, int64_t n_begin, int64_t n_end,
                 float* y, int64_t ldy) {
  if (m <= 0 || n_end <= n_begin) return;
  if (m == 1) {
    int64_t j = n_begin;
    for (; j + Kernel::kGemvW <= n_end; j += Kernel::kGemvW) {
      Kernel::template Tile<Kernel::kGemvW, 1, WeightT>(x, k, w + j * k, y + j, ldy);
    }
    for (; j < n_end; j += Kernel::kTileW) {
      const int wc = static_cast<int>(std::min<int64_t>(Kernel::kTileW, n_end - j));
      DispatchWR<Kernel, WeightT>(wc, 1, x, k, w + j * k, y + j, ldy);
    }
    return;
  }
  if constexpr (KernelPacksWeights<Kernel>()) {
    // (k == 0 takes the plain path, whose tiles write the empty sums as 0.)
    if (m >= 2 * Kernel::kPackR && k > 0) return PackedMatMul<Kernel>(x, m, k, w, n_begin, n_end, y, ldy);
  }
  const int64_t mc = PanelRows<Kernel>(k, Kernel::kTileR);
  for (int64_t i0 = 0; i0 < m; i0 += mc) {
    const int64_t i_end = std::min(m, i0 + mc);
    for (int64_t j = n_begin; j < n_end; j += Kernel::kTileW) {
      const int wc = static_cast<int>(std::min<int64_t>(Kernel::kTileW, n_end - j));
      for (int64_t i = i0; i < i_end; i += Kernel::kTileR) {
        const int rc = static_cast<int>(std::min<int64_t>(Kernel::kTileR, i_end - i));
        DispatchWR<Kernel, WeightT>(wc, rc, x + i * k, k, w + j * k, y + i * ldy + j, ldy);
      }
    }
  }
}

}  // namespace ember::kernels::cpu
