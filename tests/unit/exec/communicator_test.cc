#include "exec/communicator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace ember::exec {
namespace {

class CommunicatorTest : public ::testing::Test {
 protected:
  // Death tests fork; "threadsafe" re-executes the binary, which is safe with the thread pool.
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
  LocalCommunicator& comm_ = LocalCommunicator::Instance();
};

TEST_F(CommunicatorTest, LocalIsRankZeroOfOne) {
  EXPECT_EQ(comm_.rank(), 0);
  EXPECT_EQ(comm_.world_size(), 1);
  EXPECT_EQ(&OrLocal(nullptr), &LocalCommunicator::Instance());
  LocalCommunicator other;
  EXPECT_EQ(&OrLocal(&other), &other);
}

TEST_F(CommunicatorTest, AllReduceSumOverOneRankKeepsEveryBit) {
  // Values whose bits a careless "sum" (0 + x, or x * 1 with flush-to-zero) could change.
  std::vector<float> data = {-0.0f, 1e-45f, 3.25f, -7.5e30f};
  const std::vector<float> before = data;
  comm_.AllReduceSum(data.data(), static_cast<int64_t>(data.size()));
  for (size_t i = 0; i < data.size(); ++i) {
    EXPECT_EQ(std::signbit(data[i]), std::signbit(before[i]));
    EXPECT_EQ(data[i], before[i]);
  }
  comm_.AllReduceSum(nullptr, 0);  // nothing to reduce
}

TEST_F(CommunicatorTest, AllGatherCopiesTheOneRank) {
  const std::vector<float> in = {1.0f, 2.0f, 3.0f};
  std::vector<float> out(3, 0.0f);
  comm_.AllGather(in.data(), 3, out.data());
  EXPECT_EQ(out, in);
  // In place: this rank's slot of the output is its input.
  comm_.AllGather(out.data(), 3, out.data());
  EXPECT_EQ(out, in);
  comm_.AllGather(nullptr, 0, nullptr);
}

TEST_F(CommunicatorTest, AllToAllVCopiesRowsToSelf) {
  const int64_t width = 4;
  std::vector<float> send(3 * width);
  for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(i) * 0.5f;
  std::vector<float> recv(send.size(), -1.0f);
  const std::vector<int64_t> rows = {3};
  comm_.AllToAllV(send.data(), rows, recv.data(), rows, width);
  EXPECT_EQ(recv, send);
  const std::vector<int64_t> none = {0};
  comm_.AllToAllV(nullptr, none, nullptr, none, width);
  comm_.AllToAllV(send.data(), rows, recv.data(), rows, 0);  // zero-width rows move nothing
}

TEST_F(CommunicatorTest, ReduceScatterSumOverOneRankCopiesEveryBit) {
  const std::vector<float> in = {-0.0f, 1e-45f, 3.25f};
  std::vector<float> out(3, 9.0f);
  comm_.ReduceScatterSum(in.data(), 3, out.data());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(std::signbit(out[i]), std::signbit(in[i]));
    EXPECT_EQ(out[i], in[i]);
  }
  comm_.ReduceScatterSum(nullptr, 0, nullptr);
}

TEST_F(CommunicatorTest, BroadcastFromTheOneRankLeavesTheBytes) {
  std::vector<uint8_t> data = {1, 2, 3};
  comm_.Broadcast(data.data(), 3, 0);
  EXPECT_EQ(data, (std::vector<uint8_t>{1, 2, 3}));
  comm_.Broadcast(nullptr, 0, 0);
}

TEST_F(CommunicatorTest, AllReduceMinOverOneRankIsTheValue) {
  EXPECT_EQ(comm_.AllReduceMin(42), 42);
  EXPECT_EQ(comm_.AllReduceMin(-7), -7);
}

// EMBER_CHECK prints the failed condition and its message (core/check.h).
TEST_F(CommunicatorTest, BadArgumentsAreBugs) {
  std::vector<float> a(8), b(8);
  const std::vector<int64_t> two = {2};
  const std::vector<int64_t> three = {3};
  const std::vector<int64_t> per_two_ranks = {1, 1};
  const std::vector<int64_t> negative = {-1};
  EXPECT_DEATH(comm_.AllReduceSum(a.data(), -1), "count >= 0 — AllReduceSum: negative count -1");
  EXPECT_DEATH(comm_.AllReduceSum(nullptr, 4), "data != nullptr");
  EXPECT_DEATH(comm_.AllGather(a.data(), -2, b.data()), "count_per_rank >= 0");
  EXPECT_DEATH(comm_.AllGather(nullptr, 4, b.data()), "in != nullptr");
  EXPECT_DEATH(comm_.AllGather(a.data(), 4, a.data() + 2), "in \\+ count_per_rank <= out");
  EXPECT_DEATH(comm_.AllToAllV(a.data(), per_two_ranks, b.data(), per_two_ranks, 4), "send_rows.size\\(\\) == 1");
  EXPECT_DEATH(comm_.AllToAllV(a.data(), two, b.data(), three, 2), "rank 0 sends itself 2 rows but expects 3");
  EXPECT_DEATH(comm_.AllToAllV(a.data(), negative, b.data(), negative, 2), "send_rows\\[0\\] >= 0");
  EXPECT_DEATH(comm_.AllToAllV(a.data(), two, b.data(), two, -1), "row_width >= 0");
  EXPECT_DEATH(comm_.AllToAllV(nullptr, two, b.data(), two, 4), "send != nullptr");
  EXPECT_DEATH(comm_.AllToAllV(a.data(), two, a.data() + 1, two, 2), "send \\+ count <= recv");
  EXPECT_DEATH(comm_.ReduceScatterSum(a.data(), -1, b.data()), "count_per_rank >= 0");
  EXPECT_DEATH(comm_.ReduceScatterSum(a.data(), 4, a.data() + 2), "in and out overlap");
  EXPECT_DEATH(comm_.Broadcast(a.data(), 4, 1), "root 1 in a world of 1");
  EXPECT_DEATH(comm_.Broadcast(a.data(), -4, 0), "bytes >= 0");
  EXPECT_DEATH(comm_.Broadcast(nullptr, 4, 0), "data != nullptr");
  // No peer to talk to.
  EXPECT_DEATH(comm_.Send(a.data(), 4, 0, 7), "Send to rank 0 \\(tag 7\\) in a world of 1");
  EXPECT_DEATH(comm_.Recv(a.data(), 4, 0, 7), "Recv from rank 0 \\(tag 7\\) in a world of 1");
}

}  // namespace
}  // namespace ember::exec
