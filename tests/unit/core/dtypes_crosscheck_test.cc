// The dtype conversions (core/dtype_convert.cc) against outside implementations: f16 and bf16
// against the x86 F16C / AVX512-BF16 conversion instructions where the CPU has them; e4m3, e5m2,
// e2m1 and e8m0 against tables made with ml_dtypes (dtype_golden_tables.h, by
// scripts/gen_dtype_tables.py). dtypes_test.cc checks them against the reference in
// dtype_reference.h.
//
// Set EMBER_DTYPES_EXHAUSTIVE=1 to also run every encoder on all 2^32 f32 inputs against those
// references (about 5 minutes on 2 cores; skipped otherwise).
#include "core/dtype_rows.h"
#include "core/dtypes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_features.h"
#include "dtype_golden_tables.h"
#include "dtype_reference.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#define EMBER_TEST_X86 1
#else
#define EMBER_TEST_X86 0
#endif

namespace ember::test {
namespace {

bool ExhaustiveRequested() {
  const char* flag = std::getenv("EMBER_DTYPES_EXHAUSTIVE");
  return flag != nullptr && flag[0] != '\0' && std::string(flag) != "0";
}

// ---- Hardware cross-checks ----------------------------------------------------------------------

#if EMBER_TEST_X86
__attribute__((target("f16c"))) uint16_t HwF32ToF16(float x) {
  return static_cast<uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float HwF16ToF32(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("avx512f,avx512vl,avx512bf16"))) uint16_t HwF32ToBF16(float x) {
  const __m128bh packed = _mm_cvtneps_pbh(_mm_set_ss(x));
  uint16_t lanes[8];
  std::memcpy(lanes, &packed, sizeof(lanes));
  return lanes[0];
}
// CPUID + XGETBV (core/cpu_features.h): also checks that the OS saves the vector registers, and
// works with clang, whose __builtin_cpu_supports does not know "f16c".
bool HaveF16C() { return HostCpuFeatures().f16c; }
bool HaveAvx512Bf16() {
  const CpuFeatures& cpu = HostCpuFeatures();
  return cpu.avx512f && cpu.avx512vl && cpu.avx512bf16;
}
#else
uint16_t HwF32ToF16(float) { return 0; }
float HwF16ToF32(uint16_t) { return 0; }
uint16_t HwF32ToBF16(float) { return 0; }
bool HaveF16C() { return false; }
bool HaveAvx512Bf16() { return false; }
#endif

// f32 inputs around every boundary of a 16-bit format: each code's value +-4 ulps and each midpoint
// +-4 ulps, both signs, plus the overflow region.
// The value above the largest finite one is the unbounded format's next value (largest + 1 ulp).
std::vector<float> BoundaryInputs(float (*decode)(uint32_t), uint32_t max_finite) {
  std::vector<float> inputs;
  for (uint32_t code = 0; code <= max_finite; ++code) {
    const float a = decode(code);
    const double b = code < max_finite ? decode(code + 1) : 2.0 * a - decode(code - 1);
    const float mid = static_cast<float>((static_cast<double>(a) + b) / 2);
    for (const float center : {a, mid}) {
      float lo = center, hi = center;
      inputs.push_back(center);
      for (int k = 0; k < 4; ++k) {
        lo = Down(lo);
        hi = Up(hi);
        inputs.push_back(lo);
        inputs.push_back(hi);
      }
    }
  }
  const size_t positive = inputs.size();
  for (size_t i = 0; i < positive; ++i) inputs.push_back(-inputs[i]);
  return inputs;
}

TEST(DtypesHardware, F16MatchesF16C) {
  if (!HaveF16C()) GTEST_SKIP() << "no F16C on this CPU";
  for (uint32_t code = 0; code < 0x10000; ++code) {
    ASSERT_EQ(Bits(F16ToF32(static_cast<uint16_t>(code))),
              Bits(HwF16ToF32(static_cast<uint16_t>(code))))
        << "decode " << Hex(code);
  }
  const std::vector<float> inputs =
      BoundaryInputs([](uint32_t c) { return F16ToF32(static_cast<uint16_t>(c)); }, 0x7bff);
  for (const float x : inputs) {
    ASSERT_EQ(F32ToF16(x), HwF32ToF16(x)) << "x=" << x << " bits " << Hex(Bits(x));
  }
  std::mt19937 rng(777);
  std::uniform_int_distribution<uint32_t> bits_dist;
  for (int i = 0; i < 1 << 20; ++i) {
    const float x = FromBits(bits_dist(rng));  // includes NaNs with random payloads
    ASSERT_EQ(F32ToF16(x), HwF32ToF16(x)) << "bits " << Hex(Bits(x));
  }
}

// F32ToF16Row (F16C where the host has it, scalar tail) is F32ToF16 element by element, at every
// length and offset (the 8-wide body and the tail).
TEST(DtypesHardware, F16RowMatchesScalar) {
  const std::vector<float> boundary =
      BoundaryInputs([](uint32_t c) { return F16ToF32(static_cast<uint16_t>(c)); }, 0x7bff);
  std::mt19937 rng(778);
  std::uniform_int_distribution<uint32_t> bits_dist;
  std::vector<float> inputs = boundary;
  for (int i = 0; i < 1 << 16; ++i) inputs.push_back(FromBits(bits_dist(rng)));
  std::vector<uint16_t> out(inputs.size());
  F32ToF16Row(inputs.data(), static_cast<int64_t>(inputs.size()), out.data());
  for (size_t i = 0; i < inputs.size(); ++i) ASSERT_EQ(out[i], F32ToF16(inputs[i])) << "bits " << Hex(Bits(inputs[i]));
  for (int64_t n = 0; n <= 19; ++n) {
    std::vector<uint16_t> part(static_cast<size_t>(n) + 1, 0xabcd);
    F32ToF16Row(inputs.data() + 3, n, part.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(part[i], F32ToF16(inputs[3 + i])) << "n " << n << " i " << i;
    ASSERT_EQ(part[n], 0xabcd) << "wrote past n " << n;
  }
}

TEST(DtypesHardware, BF16MatchesAvx512Bf16) {
  if (!HaveAvx512Bf16()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  // VCVTNEPS2BF16 treats f32 subnormal inputs as zero; F32ToBF16 rounds them (checked against the
  // reference encoder in dtypes_test.cc), so those are left out here.
  auto comparable = [](float x) { return std::fpclassify(x) != FP_SUBNORMAL; };
  const std::vector<float> inputs =
      BoundaryInputs([](uint32_t c) { return BF16ToF32(static_cast<uint16_t>(c)); }, 0x7f7f);
  for (const float x : inputs) {
    if (!comparable(x)) continue;
    ASSERT_EQ(F32ToBF16(x), HwF32ToBF16(x)) << "x=" << x << " bits " << Hex(Bits(x));
  }
  std::mt19937 rng(778);
  std::uniform_int_distribution<uint32_t> bits_dist;
  for (int i = 0; i < 1 << 20; ++i) {
    const float x = FromBits(bits_dist(rng));
    if (!comparable(x)) continue;
    ASSERT_EQ(F32ToBF16(x), HwF32ToBF16(x)) << "bits " << Hex(Bits(x));
  }
}

// ---- ml_dtypes golden tables --------------------------------------------------------------------

enum class GoldenKind { kE4M3, kE5M2, kE2M1, kE8M0 };

struct GoldenFormat {
  GoldenKind kind;
  const char* name;
  const uint32_t* decode;
  uint32_t num_codes;
  const golden::EncodeRun* runs;
  size_t num_runs;
  float (*our_decode)(uint32_t);
  uint32_t (*our_encode)(float);  // the non-saturating / nearest variant ml_dtypes implements
};

const std::vector<GoldenFormat>& GoldenFormats() {
  using namespace golden;
  static const std::vector<GoldenFormat> formats = {
      {GoldenKind::kE4M3, "e4m3", kE4M3Decode, 256, kE4M3EncodeRuns, std::size(kE4M3EncodeRuns),
       [](uint32_t c) { return F8E4M3ToF32(static_cast<uint8_t>(c)); },
       [](float x) -> uint32_t { return F32ToF8E4M3(x, false); }},
      {GoldenKind::kE5M2, "e5m2", kE5M2Decode, 256, kE5M2EncodeRuns, std::size(kE5M2EncodeRuns),
       [](uint32_t c) { return F8E5M2ToF32(static_cast<uint8_t>(c)); },
       [](float x) -> uint32_t { return F32ToF8E5M2(x, false); }},
      {GoldenKind::kE2M1, "e2m1", kE2M1Decode, 16, kE2M1EncodeRuns, std::size(kE2M1EncodeRuns),
       [](uint32_t c) { return F4E2M1ToF32(static_cast<uint8_t>(c)); },
       [](float x) -> uint32_t { return F32ToF4E2M1(x); }},
      {GoldenKind::kE8M0, "e8m0", kE8M0Decode, 256, kE8M0EncodeRuns, std::size(kE8M0EncodeRuns),
       [](uint32_t c) { return E8M0ToF32(static_cast<uint8_t>(c)); },
       [](float x) -> uint32_t { return F32ToE8M0(x, E8M0Rounding::kNearest); }},
  };
  return formats;
}

// ember's result for input `x` given ml_dtypes' code, where ember's documented rules differ:
//   e5m2: ml_dtypes drops NaN payloads (always 0x7e / 0xfe); ember keeps the top payload bit.
//   e2m1: ml_dtypes turns NaN into a zero of the opposite sign (+NaN -> 0x8, -NaN -> 0x0); ember
//         gives +0 for every NaN.
//   e8m0: ml_dtypes gives NaN for +-0, +inf and values beyond 2^127; ember clamps those to 0x00 /
//         0xfe (see F32ToE8M0). And for the f32 subnormals strictly between 2^-127 and 1.5 * 2^-127
//         (bit patterns 0x00400001..0x005fffff) ml_dtypes (and torch 2.x) give 2^-126 although
//         2^-127 is nearer; ember gives 2^-127 (code 0x00).
uint32_t ExpectedFromGolden(const GoldenFormat& g, float x, uint32_t golden_code) {
  if (g.kind == GoldenKind::kE5M2 && std::isnan(x)) return golden_code | ((Bits(x) >> 21) & 1u);
  if (g.kind == GoldenKind::kE2M1 && std::isnan(x)) return 0x0;
  if (g.kind == GoldenKind::kE8M0) {
    const uint32_t bits = Bits(x);
    if (bits == 0x80000000u) return 0x00;  // -0
    if (!std::isnan(x) && golden_code == 0xff && !std::signbit(x)) return x >= 1.0f ? 0xfe : 0x00;
    if (bits > 0x00400000u && bits < 0x00600000u) return 0x00;
  }
  return golden_code;
}

TEST(DtypesGolden, DecodeMatchesMlDtypes) {
  for (const GoldenFormat& g : GoldenFormats()) {
    for (uint32_t code = 0; code < g.num_codes; ++code) {
      const float ours = g.our_decode(code);
      const float theirs = FromBits(g.decode[code]);
      if (std::isnan(theirs)) {
        EXPECT_TRUE(std::isnan(ours)) << g.name << " " << Hex(code);
        EXPECT_EQ(std::signbit(ours), std::signbit(theirs)) << g.name << " " << Hex(code);
      } else {
        EXPECT_EQ(Bits(ours), Bits(theirs)) << g.name << " " << Hex(code);
      }
    }
  }
}

// Checks both ends and the middle of every run of ml_dtypes' f32 -> code map.
TEST(DtypesGolden, EncodeMatchesMlDtypesAtEveryRunBoundary) {
  for (const GoldenFormat& g : GoldenFormats()) {
    for (size_t i = 0; i < g.num_runs; ++i) {
      const uint32_t first = g.runs[i].first;
      const uint32_t last = i + 1 < g.num_runs ? g.runs[i + 1].first - 1 : 0xffffffffu;
      for (const uint32_t pattern : {first, last, first + (last - first) / 2}) {
        const float x = FromBits(pattern);
        ASSERT_EQ(g.our_encode(x), ExpectedFromGolden(g, x, g.runs[i].code))
            << g.name << " input bits " << Hex(pattern) << " (" << x << ")";
      }
    }
  }
}

// ---- Exhaustive over all f32 inputs (opt-in) ----------------------------------------------------

// Runs check(begin, end) over [0, 2^32) split across the hardware threads; returns the sum of what
// the calls return (their mismatch counts).
uint64_t OverAllF32Patterns(const std::function<uint64_t(uint64_t, uint64_t)>& check) {
  const uint64_t parts = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t total = uint64_t{1} << 32;
  std::vector<uint64_t> counts(parts, 0);
  std::vector<std::thread> threads;
  for (uint64_t i = 0; i < parts; ++i) {
    threads.emplace_back([&, i] { counts[i] = check(total * i / parts, total * (i + 1) / parts); });
  }
  for (std::thread& thread : threads) thread.join();
  uint64_t sum = 0;
  for (const uint64_t count : counts) sum += count;
  return sum;
}

TEST(DtypesExhaustive, AllF32InputsMatchMlDtypes) {
  if (!ExhaustiveRequested()) GTEST_SKIP() << "set EMBER_DTYPES_EXHAUSTIVE=1";
  for (const GoldenFormat& g : GoldenFormats()) {
    const uint64_t mismatches = OverAllF32Patterns([&g](uint64_t begin, uint64_t end) {
      // The run holding `begin`.
      size_t run = 0;
      while (run + 1 < g.num_runs && g.runs[run + 1].first <= begin) ++run;
      uint64_t bad = 0;
      auto report = [&bad](const char* what, uint64_t p) {
        if (++bad <= 5) ADD_FAILURE() << what << " bits " << Hex(static_cast<uint32_t>(p));
      };
      for (uint64_t p = begin; p < end; ++p) {
        const uint32_t pattern = static_cast<uint32_t>(p);
        while (run + 1 < g.num_runs && g.runs[run + 1].first <= pattern) ++run;
        const float x = FromBits(pattern);
        const uint32_t golden_code = g.runs[run].code;
        const uint32_t expected = ExpectedFromGolden(g, x, golden_code);
        if (g.our_encode(x) != expected) report(g.name, p);
        // The saturating and unsigned variants follow from the same table.
        if (g.kind == GoldenKind::kE4M3) {
          const bool overflow = !std::isnan(x) && (golden_code & 0x7f) == 0x7f;
          const uint32_t sat = overflow ? (golden_code & 0x80) | 0x7e : golden_code;
          if (F32ToF8E4M3(x, true) != sat) report("e4m3 saturating", p);
          const uint32_t unsigned_code = std::isnan(x) ? 0x7f : std::signbit(x) ? 0 : sat;
          if (F32ToUE4M3(x) != unsigned_code) report("ue4m3", p);
        } else if (g.kind == GoldenKind::kE5M2) {
          const bool overflow = !std::isnan(x) && (golden_code & 0x7f) == 0x7c;
          const uint32_t sat = overflow ? (golden_code & 0x80) | 0x7b : expected;
          if (F32ToF8E5M2(x, true) != sat) report("e5m2 saturating", p);
        }
      }
      return bad;
    });
    EXPECT_EQ(mismatches, 0u) << g.name;
  }
}

TEST(DtypesExhaustive, AllF32InputsMatchHardwareF16AndBF16) {
  if (!ExhaustiveRequested()) GTEST_SKIP() << "set EMBER_DTYPES_EXHAUSTIVE=1";
  const bool f16c = HaveF16C(), bf16 = HaveAvx512Bf16();
  if (!f16c && !bf16) GTEST_SKIP() << "neither F16C nor AVX512-BF16";
  const ReferenceEncoder bf16_reference(AllFormats()[0]);
  const uint64_t mismatches = OverAllF32Patterns([&](uint64_t begin, uint64_t end) {
    uint64_t bad = 0;
    auto report = [&bad](const char* what, uint64_t p) {
      if (++bad <= 5) ADD_FAILURE() << what << " bits " << Hex(static_cast<uint32_t>(p));
    };
    for (uint64_t p = begin; p < end; ++p) {
      const float x = FromBits(static_cast<uint32_t>(p));
      if (f16c && F32ToF16(x) != HwF32ToF16(x)) report("f16", p);
      if (std::fpclassify(x) == FP_SUBNORMAL) {  // VCVTNEPS2BF16 flushes these; use the reference
        if (F32ToBF16(x) != bf16_reference.Encode(x)) report("bf16 subnormal", p);
      } else if (bf16 && F32ToBF16(x) != HwF32ToBF16(x)) {
        report("bf16", p);
      }
    }
    return bad;
  });
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace ember::test
