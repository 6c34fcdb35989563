// The step workspace: aligned takes, LIFO reuse through scopes, growth when a step does not fit,
// and the one-thread-at-a-time rule.
#include "core/workspace.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

namespace ember {
namespace {

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % Workspace::kAlignment == 0; }

TEST(WorkspaceTest, TakesAreAlignedAndScopesGiveThemBackInOrder) {
  Workspace ws;
  ASSERT_TRUE(ws.Reserve(4096).ok());
  Workspace::Scope outer(ws);
  float* a = ws.Take<float>(3);
  EXPECT_TRUE(Aligned(a));
  float* inner_first = nullptr;
  {
    Workspace::Scope inner(ws);
    inner_first = ws.Take<float>(5);
    EXPECT_TRUE(Aligned(inner_first));
    EXPECT_EQ(reinterpret_cast<char*>(inner_first) - reinterpret_cast<char*>(a), Workspace::kAlignment);
  }
  // The inner scope's bytes are reused by the next take.
  EXPECT_EQ(ws.Take<double>(1), reinterpret_cast<double*>(inner_first));
  EXPECT_EQ(ws.high_water(), 2 * Workspace::kAlignment);
}

TEST(WorkspaceTest, TakeZeroedClears) {
  Workspace ws;
  ASSERT_TRUE(ws.Reserve(1024).ok());
  {
    Workspace::Scope scope(ws);
    int32_t* p = ws.Take<int32_t>(16);
    for (int i = 0; i < 16; ++i) p[i] = -1;
  }
  Workspace::Scope scope(ws);
  const int32_t* z = ws.TakeZeroed<int32_t>(16);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(z[i], 0);
}

TEST(WorkspaceTest, AStepThatDoesNotFitRunsAndTheWorkspaceGrowsToItsPeak) {
  Workspace ws;
  ASSERT_TRUE(ws.Reserve(128).ok());
  {
    Workspace::Scope scope(ws);
    float* a = ws.Take<float>(16);   // 64 bytes: fits
    float* b = ws.Take<float>(100);  // 400 bytes: does not
    for (int i = 0; i < 16; ++i) a[i] = 1.0f;
    for (int i = 0; i < 100; ++i) b[i] = 2.0f;  // usable memory, wherever it came from
    EXPECT_EQ(ws.capacity(), 128);
  }
  EXPECT_EQ(ws.overflowed_steps(), 1);
  EXPECT_EQ(ws.capacity(), Workspace::RoundUp(64 + 400));
  Workspace::Scope scope(ws);
  ws.Take<float>(16);
  ws.Take<float>(100);
  EXPECT_EQ(ws.overflowed_steps(), 1);  // the step fits now
}

TEST(WorkspaceTest, AReservationTheHostCannotHoldIsAnErrorAndChangesNothing) {
  Workspace ws;
  ASSERT_TRUE(ws.Reserve(4096).ok());
  const Status s = ws.Reserve(int64_t{1} << 62);  // 4 EiB: more than any address space
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("step workspace"), std::string::npos) << s.message();
  EXPECT_EQ(ws.capacity(), 4096);
  Workspace::Scope scope(ws);
  EXPECT_NE(ws.Take<float>(16), nullptr);
}

TEST(WorkspaceTest, BytesForMatchesWhatTakeUses) {
  EXPECT_EQ(Workspace::BytesFor<float>(0), 0);
  EXPECT_EQ(Workspace::BytesFor<float>(1), Workspace::kAlignment);
  EXPECT_EQ(Workspace::BytesFor<float>(16), 64);
  EXPECT_EQ(Workspace::BytesFor<double>(9), 128);
}

TEST(WorkspaceTest, TensorsCarryTheirDevice) {
  Workspace ws;
  Workspace::Scope scope(ws);
  const Tensor t = ws.TakeTensor(DType::kF32, Shape{2, 3});
  EXPECT_EQ(t.device, Device::kHost);
  EXPECT_EQ(t.NumElements(), 6);
  EXPECT_NE(t.HostAs<float>(DType::kF32), nullptr);
  Tensor device = t;
  device.device = Device::kCuda;
  EXPECT_DEATH(device.HostAs<float>(DType::kF32), "tensor on cuda used as host memory");
  EXPECT_DEATH(t.HostAs<uint16_t>(DType::kBF16), "tensor of f32 used as bf16");
}

TEST(WorkspaceDeathTest, TwoThreadsInOneWorkspaceFailACheck) {
  EXPECT_DEATH(
      {
        Workspace ws;
        Workspace::Scope scope(ws);
        std::thread other([&] { Workspace::Scope second(ws); });
        other.join();
      },
      "two threads run steps of one model at once");
}

TEST(WorkspaceDeathTest, TakeOutsideAScopeFailsACheck) {
  Workspace ws;
  EXPECT_DEATH(ws.Take<float>(1), "outside a scope");
}

}  // namespace
}  // namespace ember
