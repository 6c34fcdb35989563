// The row-dot kernels called directly: the `prefetch` argument (the codes of a later row, requested
// while this one is reduced) is only a hint. For every available variant, format, odd k and
// activation-row count, the bits of out[] are the same with no prefetch row, with another row
// and with the row itself; a kernel that read values through the prefetch pointer would differ.
// Also: the AVX-512 activation quantizer against the portable one, byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "quant/block_scaled.h"
#include "quant/block_scaled_dot.h"
#include "quant/block_scaled_dot_variants.h"

namespace ember::quant {
namespace {

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

// Codes of two rows, back to back: row 0 is reduced, row 1 (different bytes) is prefetched.
std::vector<uint8_t> RandomCodes(int64_t bytes, bool fp8, std::mt19937& rng) {
  std::vector<uint8_t> codes(bytes);
  for (auto& b : codes) b = static_cast<uint8_t>(rng()) & (fp8 ? 0xf7 : 0xff);  // no FP8 NaN codes
  return codes;
}

TEST(BlockScaledDot, PrefetchArgumentNeverChangesResults) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const Isa isa : AvailableIsas()) {
    const BlockDotVariant* variant = &kBlockDotVariants.For(isa);
    for (const int64_t k : {32, 96, 160, 4096, 4192}) {
      // FP4: `rows` activation rows in the int8 layout.
      const ActivationLayout layout = Int8ActivationLayout(k);
      std::unique_ptr<uint8_t, AlignedFree> act(
          static_cast<uint8_t*>(std::aligned_alloc(64, kMaxBlockDotRows * layout.bytes)));
      std::vector<float> x(kMaxBlockDotRows * k);
      for (float& v : x) v = normal(rng);
      for (int r = 0; r < kMaxBlockDotRows; ++r) QuantizeActivationInt8(x.data() + r * k, k, act.get() + r * layout.bytes);
      for (const bool nvfp4 : {false, true}) {
        const std::vector<uint8_t> codes = RandomCodes(k, /*fp8=*/false, rng);  // two rows of k / 2 bytes
        std::vector<uint8_t> scales(nvfp4 ? k / 16 : k / 32);
        for (auto& s : scales) s = nvfp4 ? static_cast<uint8_t>(0x20 + rng() % 64) : static_cast<uint8_t>(120 + rng() % 8);
        const Fp4DotFn dot = variant->Fp4For(nvfp4 ? WeightFormat::kNvfp4 : WeightFormat::kMxfp4);
        for (int rows = 1; rows <= kMaxBlockDotRows; ++rows) {
          float plain[kMaxBlockDotRows], other[kMaxBlockDotRows], self[kMaxBlockDotRows];
          dot(k, codes.data(), scales.data(), act.get(), layout.bytes, rows, plain, nullptr);
          dot(k, codes.data(), scales.data(), act.get(), layout.bytes, rows, other, codes.data() + k / 2);
          dot(k, codes.data(), scales.data(), act.get(), layout.bytes, rows, self, codes.data());
          const std::string where = std::string(IsaName(isa)) + (nvfp4 ? " nvfp4" : " mxfp4") +
                                    " k=" + std::to_string(k) + " rows=" + std::to_string(rows);
          EXPECT_EQ(std::memcmp(plain, other, rows * sizeof(float)), 0) << where;
          EXPECT_EQ(std::memcmp(plain, self, rows * sizeof(float)), 0) << where;
        }
      }
      // FP8: f32 activations, with and without 128-element block scales.
      const std::vector<uint8_t> codes = RandomCodes(2 * k, /*fp8=*/true, rng);
      std::vector<float> block_scales((k + 127) / 128);
      for (float& s : block_scales) s = 1e-3f * static_cast<float>(1 + rng() % 100);
      for (const float* bs : {static_cast<const float*>(nullptr), static_cast<const float*>(block_scales.data())}) {
        for (int rows = 1; rows <= kMaxBlockDotRows; ++rows) {
          float plain[kMaxBlockDotRows], other[kMaxBlockDotRows];
          variant->fp8(k, codes.data(), bs, x.data(), k, rows, plain, nullptr);
          variant->fp8(k, codes.data(), bs, x.data(), k, rows, other, codes.data() + k);
          EXPECT_EQ(std::memcmp(plain, other, rows * sizeof(float)), 0)
              << IsaName(isa) << " fp8 k=" << k << " rows=" << rows << (bs ? " block scales" : "");
        }
      }
    }
  }
}

// The AVX-512 activation quantizer writes exactly the portable one's bytes (q, scales, chunk-order
// |q| and sign flags, lane scales), on k with and without a short last chunk and on NaN, +-inf,
// +-0, subnormal and all-zero groups.
TEST(BlockScaledDot, Avx512ActivationQuantizerMatchesPortable) {
  if (!HostCpuFeatures().HasAvx512Set()) GTEST_SKIP() << "no AVX-512 on this host";
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const int64_t k : {16, 48, 128, 144, 4096, 4192}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(k);
      for (float& v : x) {
        v = std::ldexp(normal(rng), static_cast<int>(rng() % 60) - 30);
        switch (rng() % 32) {
          case 0: v = std::numeric_limits<float>::quiet_NaN(); break;
          case 1: v = std::numeric_limits<float>::infinity(); break;
          case 2: v = -std::numeric_limits<float>::infinity(); break;
          case 3: v = -0.0f; break;
          case 4: v = 1e-45f; break;
          default: break;
        }
      }
      if (trial == 0) std::fill(x.begin(), x.end(), 0.0f);
      const int64_t bytes = Int8ActivationLayout(k).bytes;
      std::unique_ptr<uint8_t, AlignedFree> portable(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
      std::unique_ptr<uint8_t, AlignedFree> avx512(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
      std::memset(portable.get(), 0xcd, bytes);  // padding between the arrays compares too
      std::memset(avx512.get(), 0xcd, bytes);
      QuantizeActivationInt8Portable(x.data(), k, portable.get());
      QuantizeActivationInt8Avx512(x.data(), k, avx512.get());
      EXPECT_EQ(std::memcmp(portable.get(), avx512.get(), bytes), 0) << "k=" << k << " trial " << trial;
    }
  }
}

}  // namespace
}  // namespace ember::quant
