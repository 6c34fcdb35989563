// Every build compiles in each SIMD level. The presets use two compilers (GCC for release and
// asan, clang for tsan and fuzz) that spell some feature macros differently, and a level whose
// check sees no macro is compiled out silently: clang's __AMXTILE__ against GCC's __AMX_TILE__
// once dropped the amx level from the tsan build. This suite runs in both compilers' builds.
#include <gtest/gtest.h>

#include "core/cpu_features.h"
#include "core/isa.h"

namespace ember {
namespace {

TEST(IsaCompiled, EveryLevelIsCompiledIn) {
  EXPECT_TRUE(internal::CompilerTargetsAvx2());
  EXPECT_TRUE(internal::CompilerTargetsAvx512());
  EXPECT_TRUE(internal::CompilerTargetsAmx());
}

TEST(IsaCompiled, EveryLevelTheHostRunsIsSelectable) {
  const CpuFeatures& host = HostCpuFeatures();
  if (host.HasAvx2Set()) EXPECT_TRUE(IsaSupported(Isa::kAvx2)) << IsaUnavailableReason(Isa::kAvx2);
  if (host.HasAvx512Set()) EXPECT_TRUE(IsaSupported(Isa::kAvx512)) << IsaUnavailableReason(Isa::kAvx512);
  if (host.HasAmxInt8Set()) EXPECT_TRUE(IsaSupported(Isa::kAmx)) << IsaUnavailableReason(Isa::kAmx);
}

}  // namespace
}  // namespace ember
