// The roofline yardsticks (STREAM, peak FMA, peak int8) run and count their work right. No timing
// assertions: rates depend on the machine; only that they are measured at all.
#include <gtest/gtest.h>

#include <cmath>

#include "core/cpu_features.h"
#include "kernels/cpu/peak_fma.h"
#include "kernels/cpu/stream.h"

namespace ember::kernels {
namespace {

TEST(Yardsticks, StreamKernelsMeasureARate) {
  // The kernels check their own results (EMBER_CHECK), so a wrong loop aborts here.
  EXPECT_GT(MeasureStreamTriadGBps(int64_t{1} << 20, 2, 1), 0.0);
  EXPECT_GT(MeasureStreamCopyGBps(int64_t{1} << 20, 2, 2), 0.0);
}

TEST(Yardsticks, FmaLoopsCountTheirFlops) {
  int64_t flops = 0;
  const double generic = FmaLoopGeneric(1000, &flops);
  EXPECT_EQ(flops, 8 * 4 * 2);  // 8 chains of 4 lanes, a multiply and an add each
  EXPECT_TRUE(std::isfinite(generic) && generic > 0);
  const CpuFeatures& cpu = HostCpuFeatures();
  if (cpu.HasAvx2Set()) {
    const double v = FmaLoopAvx2(1000, &flops);
    EXPECT_EQ(flops, 12 * 8 * 2);
    EXPECT_TRUE(std::isfinite(v) && v > 0);
  }
  if (cpu.HasAvx2Set() && cpu.avx512f) {
    const double v = FmaLoopAvx512(1000, &flops);
    EXPECT_EQ(flops, 16 * 16 * 2);
    EXPECT_TRUE(std::isfinite(v) && v > 0);
  }
}

TEST(Yardsticks, PeakUsesTheWidestUnit) {
  const PeakFlops peak = MeasurePeakF32Flops(1000, 2, 2);
  const CpuFeatures& cpu = HostCpuFeatures();
  EXPECT_EQ(peak.isa, cpu.HasAvx2Set() && cpu.avx512f ? "avx512" : cpu.HasAvx2Set() ? "avx2" : "generic");
  EXPECT_GT(peak.gflops, 0.0);
}

TEST(Yardsticks, Int8LoopsCountTheirOps) {
  const CpuFeatures& cpu = HostCpuFeatures();
  int64_t ops = 0;
  if (cpu.HasAvx2Set()) {
    const double v = Int8DotLoopAvx2(1000, &ops);
    EXPECT_EQ(ops, 12 * 32 * 2);  // 12 chains of 32 u8 x s8 multiply-adds
    EXPECT_TRUE(std::isfinite(v) && v > 0);
  }
  if (cpu.HasAvx2Set() && cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512vnni) {
    const double v = Int8DotLoopAvx512Vnni(1000, &ops);
    EXPECT_EQ(ops, 16 * 64 * 2);  // 16 chains of vpdpbusd, 64 multiply-adds each
    EXPECT_TRUE(std::isfinite(v) && v > 0);
  }
  const PeakInt8Ops peak = MeasurePeakInt8Ops(1000, 2, 2);
  if (cpu.HasAvx2Set()) {
    EXPECT_GT(peak.gops, 0.0);
  } else {
    EXPECT_EQ(peak.isa, "none");
    EXPECT_EQ(peak.gops, 0.0);
  }
}

}  // namespace
}  // namespace ember::kernels
