// The kernel-variant registry (core/isa.h): names, CPU requirements, selection and the
// EMBER_ISA override, and that every kernel family registers a complete variant for every level
// the host can run (a hole would be an EMBER_CHECK failure in the middle of a forward).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "core/isa.h"
#include "kernels/matmul.h"
#include "quant/block_scaled_dot.h"
#include "quant/gguf_dot.h"

namespace ember {
namespace {

// Restores the level a test changes.
class VariantRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = ActiveIsa(); }
  void TearDown() override { ASSERT_TRUE(SelectIsa(IsaName(saved_)).ok()); }

  Isa saved_ = Isa::kRef;
};

TEST_F(VariantRegistryTest, NamesRoundTripAndRefAndGenericAlwaysRun) {
  for (int i = 0; i < kIsaCount; ++i) {
    const Isa isa = static_cast<Isa>(i);
    const Expected<Isa> parsed = ParseIsa(IsaName(isa));
    ASSERT_TRUE(parsed.ok()) << IsaName(isa);
    EXPECT_EQ(*parsed, isa);
  }
  const std::vector<Isa>& available = AvailableIsas();
  ASSERT_GE(available.size(), 2u);
  EXPECT_EQ(available[0], Isa::kRef);
  EXPECT_EQ(available[1], Isa::kGeneric);
  for (size_t i = 1; i < available.size(); ++i) EXPECT_LT(available[i - 1], available[i]) << "slowest first";
  // With no override (the suite runs without EMBER_ISA) the fastest level is the default.
  if (std::getenv(kIsaEnvVar) == nullptr) {
    EXPECT_EQ(saved_, available.back());
  }
}

TEST_F(VariantRegistryTest, SelectionSwitchesEveryFamilyAtOnce) {
  for (const Isa isa : AvailableIsas()) {
    ASSERT_TRUE(SelectIsa(IsaName(isa)).ok()) << IsaName(isa);
    EXPECT_EQ(ActiveIsa(), isa);
    EXPECT_EQ(&kernels::ActiveVariant(), &kernels::kKernelVariants.For(isa));
    EXPECT_EQ(&quant::ActiveDotVariant(), &quant::kDotVariants.For(isa));
    EXPECT_EQ(&quant::ActiveBlockDotVariant(), &quant::kBlockDotVariants.For(isa));
  }
}

TEST_F(VariantRegistryTest, UnknownNameIsRejectedAndListsTheNames) {
  const Isa before = ActiveIsa();
  const Status status = SelectIsa("sse9");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "unknown kernel variant 'sse9': expected ref, generic, avx2, avx512 or amx");
  EXPECT_EQ(ActiveIsa(), before);
}

TEST_F(VariantRegistryTest, UnavailableLevelIsRejectedNamingTheMissingFeatures) {
  CpuFeatures avx2_only;
  avx2_only.avx2 = avx2_only.fma = avx2_only.f16c = true;
  avx2_only.avx512f = true;  // a partial AVX-512 set is still not the avx512 level
  const Expected<Isa> avx512 = ResolveIsa("avx512", avx2_only);
  ASSERT_FALSE(avx512.ok());
  EXPECT_EQ(avx512.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(avx512.status().message(),
            "kernel variant avx512 cannot run here: this CPU lacks avx512bw avx512vl avx512dq avx512vnni avx512bf16");
  EXPECT_TRUE(ResolveIsa("avx2", avx2_only).ok());

  const CpuFeatures baseline;
  EXPECT_EQ(ResolveIsa("avx2", baseline).status().message(),
            "kernel variant avx2 cannot run here: this CPU lacks avx2 fma f16c");
  EXPECT_EQ(*ResolveIsa("ref", baseline), Isa::kRef);
  EXPECT_EQ(*ResolveIsa("generic", baseline), Isa::kGeneric);
}

// amx needs the avx512 set, the two AMX features, the OS's tile state and Linux's permission; the
// reason names the first thing missing.
TEST_F(VariantRegistryTest, AmxNamesWhatIsMissing) {
  CpuFeatures cpu;
  cpu.avx2 = cpu.fma = cpu.f16c = true;
  cpu.avx512f = cpu.avx512bw = cpu.avx512vl = cpu.avx512dq = cpu.avx512vnni = cpu.avx512bf16 = true;
  ASSERT_TRUE(ResolveIsa("avx512", cpu).ok());
  EXPECT_EQ(ResolveIsa("amx", cpu).status().message(),
            "kernel variant amx cannot run here: this CPU lacks amx-tile amx-int8");
  cpu.amx_tile = true;
  EXPECT_EQ(ResolveIsa("amx", cpu).status().message(), "kernel variant amx cannot run here: this CPU lacks amx-int8");
  cpu.amx_int8 = true;
  EXPECT_EQ(ResolveIsa("amx", cpu).status().message(),
            "kernel variant amx cannot run here: the OS does not enable the AMX tile state (XCR0 bits 17 and 18)");
  cpu.amx_os_state = true;
  EXPECT_EQ(ResolveIsa("amx", cpu).status().message(),
            "kernel variant amx cannot run here: Linux did not grant the AMX tile-data permission (arch_prctl "
            "ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)");
  cpu.amx_permitted = true;
  if (internal::CompilerTargetsAmx()) {
    EXPECT_EQ(*ResolveIsa("amx", cpu), Isa::kAmx);
  }
  // The AMX features without the avx512 set are not the level either.
  CpuFeatures amx_only;
  amx_only.amx_tile = amx_only.amx_int8 = amx_only.amx_os_state = amx_only.amx_permitted = true;
  EXPECT_EQ(ResolveIsa("amx", amx_only).status().message(),
            "kernel variant amx cannot run here: this CPU lacks avx2 fma f16c avx512f avx512bw avx512vl avx512dq "
            "avx512vnni avx512bf16");
}

// On this host: amx is listed exactly when the detected features allow it, and then it is the
// default (the fastest level).
TEST_F(VariantRegistryTest, AmxIsTheDefaultWhereTheHostRunsIt) {
  const CpuFeatures& host = HostCpuFeatures();
  EXPECT_EQ(IsaSupported(Isa::kAmx), host.HasAmxInt8Set() && internal::CompilerTargetsAmx())
      << IsaUnavailableReason(Isa::kAmx);
  if (IsaSupported(Isa::kAmx) && std::getenv(kIsaEnvVar) == nullptr) {
    EXPECT_EQ(AvailableIsas().back(), Isa::kAmx);
    EXPECT_EQ(saved_, Isa::kAmx);
  }
}

TEST_F(VariantRegistryTest, HostLevelsAreExactlyTheSupportedOnes) {
  for (int i = 0; i < kIsaCount; ++i) {
    const Isa isa = static_cast<Isa>(i);
    const bool listed = std::find(AvailableIsas().begin(), AvailableIsas().end(), isa) != AvailableIsas().end();
    EXPECT_EQ(listed, IsaSupported(isa)) << IsaName(isa) << ": " << IsaUnavailableReason(isa);
    if (!listed) {
      EXPECT_FALSE(SelectIsa(IsaName(isa)).ok()) << IsaName(isa);
    }
  }
}

// Every family has a variant for every level the host runs, with every entry point filled.
TEST(VariantRegistryFamilies, EveryFamilyIsCompleteForEveryAvailableLevel) {
  for (const Isa isa : AvailableIsas()) {
    SCOPED_TRACE(IsaName(isa));
    ASSERT_TRUE(kernels::kKernelVariants.Has(isa));
    const kernels::KernelVariant& k = kernels::kKernelVariants.For(isa);
    EXPECT_NE(k.matmul_bf16, nullptr);
    EXPECT_NE(k.matmul_f32, nullptr);
    EXPECT_NE(k.paged_attention_tile, nullptr);
    EXPECT_NE(k.geglu_tanh, nullptr);
    EXPECT_NE(k.softmax_exp, nullptr);
    EXPECT_NE(k.row_attention, nullptr);
    ASSERT_TRUE(quant::kBlockDotVariants.Has(isa));
    const quant::BlockDotVariant& b = quant::kBlockDotVariants.For(isa);
    for (int f = 0; f < quant::kWeightFormatCount; ++f) {
      const auto format = static_cast<quant::WeightFormat>(f);
      EXPECT_EQ(b.Fp4For(format) != nullptr, quant::FormatTraits(format).int8_activations)
          << quant::WeightFormatName(format);
    }
    EXPECT_NE(b.fp8, nullptr);
    // The GGUF dots per type: weight_traits_test.cc, against the traits table.
    ASSERT_TRUE(quant::kDotVariants.Has(isa));
  }
}

// EMBER_ISA is read once, at the first kernel call of the process: each case runs in a fresh
// process (the threadsafe death-test style re-executes the binary) so nothing has read it yet.
TEST(VariantRegistryEnvironment, OverrideSelectsTheNamedLevelAndABadOneFallsBackWithAWarning) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv(kIsaEnvVar, "generic", 1);
        std::exit(ActiveIsa() == Isa::kGeneric ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv(kIsaEnvVar, "sse9", 1);
        std::exit(ActiveIsa() == AvailableIsas().back() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "EMBER_ISA=sse9 ignored \\(unknown kernel variant 'sse9'");
}

// EMBER_ISA=avx512 switches AMX off on an AMX host (the avx512 packed tiles run every shape);
// EMBER_ISA=amx elsewhere falls back to the fastest level, naming what is missing.
TEST(VariantRegistryEnvironment, Avx512OverrideTurnsAmxOff) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "no avx512 level here";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv(kIsaEnvVar, "avx512", 1);
        std::exit(ActiveIsa() == Isa::kAvx512 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  if (!IsaSupported(Isa::kAmx)) {
    EXPECT_EXIT(
        {
          setenv(kIsaEnvVar, "amx", 1);
          std::exit(ActiveIsa() == AvailableIsas().back() ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "EMBER_ISA=amx ignored \\(kernel variant amx cannot run here");
  }
}

}  // namespace
}  // namespace ember
