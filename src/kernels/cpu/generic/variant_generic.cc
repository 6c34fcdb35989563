// Portable matmul variant: plain C++ shaped so the compiler vectorises it for whatever the
// baseline target is (SSE2 on x86-64, NEON on arm64).
//
// Each output element owns kLanes partial sums, one per k residue mod kLanes; the innermost
// loops run over those lanes with no cross-lane dependence, which the SLP/loop vectoriser turns
// into vector multiplies and adds without needing -ffast-math (nothing is reassociated). The
// lanes are combined by a fixed tree at the end, so the result depends on k only, not on the
// tile (kernels/cpu/tiled_matmul.h). Tiles are sized for 16 SSE registers: 8 lanes = 2 xmm per
// accumulator, 2 weight rows x 2 activation rows for prefill, 4 weight rows for decode.
#include <bit>
#include <cstring>
#include <cstdint>

#include "kernels/cpu/gelu_tanh.h"
#include "kernels/cpu/paged_attention_tile.h"
#include "kernels/cpu/row_attention.h"
#include "kernels/cpu/tiled_matmul.h"
#include "kernels/ref/ref.h"
#include "kernels/variants.h"

namespace ember::kernels {
namespace {

constexpr int kLanes = 8;

inline float ToF32(uint16_t bf16) { return std::bit_cast<float>(static_cast<uint32_t>(bf16) << 16); }
inline float ToF32(float value) { return value; }

// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)): the tree a halving vector reduction uses.
inline float HorizontalSum(const float (&v)[kLanes]) {
  float half[4];
  for (int l = 0; l < 4; ++l) half[l] = v[l] + v[l + 4];
  return (half[0] + half[2]) + (half[1] + half[3]);
}

struct GenericKernel {
  static constexpr int kTileW = 2;
  static constexpr int kTileR = 2;
  static constexpr int kGemvW = 4;
  static constexpr int64_t kPanelBytes = int64_t{256} << 10;

  template <int W, int R, typename WeightT>
  [[gnu::noinline]] static void Tile(const float* x, int64_t k, const WeightT* w, float* y, int64_t ldy) {
    // Row pointers plus a separate widening pass: written this way GCC's SLP vectoriser
    // turns the bf16 widening into punpck{l,h}wd + pslld; indexing w[c * k + p + l] directly,
    // or copying x into a local array, makes it fall back to per-element inserts.
    const float* xrow[R];
    const WeightT* wrow[W];
    for (int r = 0; r < R; ++r) xrow[r] = x + r * k;
    for (int c = 0; c < W; ++c) wrow[c] = w + c * k;
    float acc[W][R][kLanes] = {};
    int64_t p = 0;
    for (; p + kLanes <= k; p += kLanes) {
      float wv[W][kLanes];
      for (int c = 0; c < W; ++c) {
        const WeightT* src = wrow[c] + p;
        for (int l = 0; l < kLanes; ++l) wv[c][l] = ToF32(src[l]);
      }
      for (int c = 0; c < W; ++c) {
        for (int r = 0; r < R; ++r) {
          const float* xs = xrow[r] + p;
          for (int l = 0; l < kLanes; ++l) acc[c][r][l] += wv[c][l] * xs[l];
        }
      }
    }
    // Tail: lane l < count gets the same update a full step would give it; the other lanes
    // are left alone (adding 0 * 0 would not change them either).
    const int count = static_cast<int>(k - p);
    for (int c = 0; c < W; ++c) {
      for (int r = 0; r < R; ++r) {
        for (int l = 0; l < count; ++l) acc[c][r][l] += ToF32(wrow[c][p + l]) * xrow[r][p + l];
      }
    }
    for (int c = 0; c < W; ++c) {
      for (int r = 0; r < R; ++r) y[r * ldy + c] = HorizontalSum(acc[c][r]);
    }
  }
};

void MatMulBF16Generic(const float* x, int64_t m, int64_t k, const uint16_t* w, int64_t n_begin,
                       int64_t n_end, float* y, int64_t ldy) {
  cpu::TiledMatMul<GenericKernel>(x, m, k, w, n_begin, n_end, y, ldy);
}

void MatMulF32Generic(const float* x, int64_t m, int64_t k, const float* w, int64_t n_begin, int64_t n_end,
                      float* y, int64_t ldy) {
  cpu::TiledMatMul<GenericKernel>(x, m, k, w, n_begin, n_end, y, ldy);
}

// Paged attention lanes (kernels/cpu/paged_attention_tile.h): 8 independent f32 lanes.
struct GenericPagedSimd {
  static constexpr int kLanes = ember::kernels::kLanes;
  static constexpr int kValueRows = 2;
  static constexpr int kValueVecs = 2;
  struct Vec {
    float v[kLanes];
  };
  template <class Op>
  static Vec Map(const Vec& a, const Vec& b, Op op) {
    Vec r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = op(a.v[l], b.v[l]);
    return r;
  }
  static Vec Zero() { return Vec{}; }
  static Vec Set1(float x) {
    Vec r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = x;
    return r;
  }
  static Vec Add(const Vec& a, const Vec& b) { return Map(a, b, [](float x, float y) { return x + y; }); }
  static Vec Sub(const Vec& a, const Vec& b) { return Map(a, b, [](float x, float y) { return x - y; }); }
  static Vec Mul(const Vec& a, const Vec& b) { return Map(a, b, [](float x, float y) { return x * y; }); }
  static Vec Max(const Vec& a, const Vec& b) { return Map(a, b, [](float x, float y) { return x > y ? x : y; }); }
  static Vec Fma(const Vec& a, const Vec& b, const Vec& c) {
    Vec r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = a.v[l] * b.v[l] + c.v[l];
    return r;
  }
  static Vec LoadF32(const float* p) { return LoadF32Tail(p, kLanes); }
  static Vec LoadF32Tail(const float* p, int64_t n) {
    Vec r{};
    for (int64_t l = 0; l < n; ++l) r.v[l] = p[l];
    return r;
  }
  static void Store(float* p, const Vec& x) {
    for (int64_t l = 0; l < kLanes; ++l) p[l] = x.v[l];
  }
  template <DType T>
  static Vec Load(const uint8_t* p) { return LoadTail<T>(p, kLanes); }
  template <DType T>
  static Vec LoadTail(const uint8_t* p, int64_t n) {
    Vec r{};
    for (int64_t l = 0; l < n; ++l) {
      if constexpr (T == DType::kF32) {
        std::memcpy(&r.v[l], p + 4 * l, 4);
      } else if constexpr (T == DType::kF16 || T == DType::kBF16) {
        uint16_t bits;
        std::memcpy(&bits, p + 2 * l, 2);
        r.v[l] = T == DType::kF16 ? F16ToF32(bits) : ToF32(bits);
      } else {
        r.v[l] = F8E4M3ToF32(p[l]);
      }
    }
    return r;
  }
  // e^x for x <= 0, the range reduction and polynomial of kernels/cpu/gelu_tanh.h lane by lane
  // (without FMA: each multiply and add rounds); n = round(x / ln 2) by the 1.5 * 2^23 trick.
  static float Exp1(float x) {
    if (!(x >= cpu::kExpMin)) return x != x ? x : 0.0f;
    constexpr float kRound = 12582912.0f;
    const float n = (x * cpu::kLog2e + kRound) - kRound;
    const float r = (x - n * cpu::kLn2Hi) - n * cpu::kLn2Lo;
    float p = cpu::kExpC[5];
    for (int i = 4; i >= 0; --i) p = p * r + cpu::kExpC[i];
    const float e_r = p * (r * r) + (r + 1.0f);
    return e_r * std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  }
  static Vec Exp(const Vec& x) {
    Vec r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = Exp1(x.v[l]);
    return r;
  }
  static Vec KeepLanes(const Vec& x, int64_t lo, int64_t hi, float fill) {
    Vec r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = l >= lo && l <= hi ? x.v[l] : fill;
    return r;
  }
  static float ReduceMax(const Vec& x) {
    float m = x.v[0];
    for (int l = 1; l < kLanes; ++l) m = x.v[l] > m ? x.v[l] : m;
    return m;
  }
  static float Sum(const Vec& x) { return HorizontalSum(x.v); }
  // One key at a time: its 8 lane sums through HorizontalSum.
  static constexpr int kScoreKeys = 1;
  static void ReduceScores(const Vec* acc, float* out) { out[0] = Sum(acc[0]); }
};

}  // namespace

const KernelVariant kGenericVariant = {&MatMulBF16Generic, &MatMulF32Generic,
                                       &cpu::PagedAttentionTile<GenericPagedSimd>, &ref::GeGluTanh,
                                       &cpu::SoftmaxExp<GenericPagedSimd>, &cpu::RowAttention<GenericPagedSimd>};

}  // namespace ember::kernels
