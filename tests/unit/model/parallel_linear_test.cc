// Column- and row-parallel linears: over one process exactly Linear::Apply, and over two
// simulated ranks the sharded products reassemble the full one.
#include "model/parallel_linear.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "support/random_values.h"

namespace ember {
namespace {

constexpr int64_t kOut = 12, kIn = 16, kRows = 5;

std::vector<float> Random(int64_t n, uint32_t seed) { return test::NormalValues(n, seed); }

// Rank 0 of two whose peer's partial sum is already known: AllReduceSum adds it (the test runs
// both "ranks" on one thread, one after the other).
class PeerSumCommunicator final : public exec::Communicator {
 public:
  explicit PeerSumCommunicator(std::vector<float> peer) : peer_(std::move(peer)) {}
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  void AllReduceSum(float* data, int64_t count) override {
    ASSERT_EQ(count, static_cast<int64_t>(peer_.size()));
    for (int64_t i = 0; i < count; ++i) data[i] += peer_[i];
  }
  void AllGather(const float*, int64_t, float*) override { FAIL() << "not used"; }
  void ReduceScatterSum(const float*, int64_t, float*) override { FAIL() << "not used"; }
  void AllToAllV(const float*, std::span<const int64_t>, float*, std::span<const int64_t>, int64_t) override {
    FAIL() << "not used";
  }
  void Broadcast(void*, int64_t, int) override { FAIL() << "not used"; }
  void Send(const void*, int64_t, int, int) override { FAIL() << "not used"; }
  void Recv(void*, int64_t, int, int) override { FAIL() << "not used"; }
  int64_t AllReduceMin(int64_t value) override {
    ADD_FAILURE() << "not used";
    return value;
  }

 private:
  std::vector<float> peer_;
};

TEST(ParallelLinearTest, OneProcessIsExactlyApply) {
  const std::vector<float> w = Random(kOut * kIn, 1), x = Random(kRows * kIn, 2);
  const Linear linear = Linear::Dense({DType::kF32, Shape({kOut, kIn}), w.data()});
  std::vector<float> expected(kRows * kOut), column(kRows * kOut), row(kRows * kOut);
  linear.Apply(x.data(), kRows, expected.data());
  ColumnParallelApply(linear, x.data(), kRows, column.data());
  RowParallelApply(linear, x.data(), kRows, row.data(), exec::LocalCommunicator::Instance());
  EXPECT_EQ(std::memcmp(column.data(), expected.data(), expected.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(row.data(), expected.data(), expected.size() * sizeof(float)), 0);
}

TEST(ParallelLinearTest, TwoRankShardsReassembleTheFullProduct) {
  const std::vector<float> w = Random(kOut * kIn, 3), x = Random(kRows * kIn, 4);
  std::vector<float> full(kRows * kOut);
  Linear::Dense({DType::kF32, Shape({kOut, kIn}), w.data()}).Apply(x.data(), kRows, full.data());

  // Column-parallel: rank r holds output rows [r * kOut / 2, (r + 1) * kOut / 2) of W.
  for (int64_t r = 0; r < 2; ++r) {
    const Linear shard = Linear::Dense({DType::kF32, Shape({kOut / 2, kIn}), w.data() + r * (kOut / 2) * kIn});
    std::vector<float> y(kRows * kOut / 2);
    ColumnParallelApply(shard, x.data(), kRows, y.data());
    for (int64_t i = 0; i < kRows; ++i) {
      for (int64_t j = 0; j < kOut / 2; ++j) {
        EXPECT_NEAR(y[i * kOut / 2 + j], full[i * kOut + r * kOut / 2 + j], 1e-5f);
      }
    }
  }

  // Row-parallel: rank r holds input columns [r * kIn / 2, (r + 1) * kIn / 2) of W and of x.
  std::vector<float> w_half[2], x_half[2];
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t o = 0; o < kOut; ++o) {
      w_half[r].insert(w_half[r].end(), w.begin() + o * kIn + r * kIn / 2, w.begin() + o * kIn + (r + 1) * kIn / 2);
    }
    for (int64_t i = 0; i < kRows; ++i) {
      x_half[r].insert(x_half[r].end(), x.begin() + i * kIn + r * kIn / 2, x.begin() + i * kIn + (r + 1) * kIn / 2);
    }
  }
  const Linear shard0 = Linear::Dense({DType::kF32, Shape({kOut, kIn / 2}), w_half[0].data()});
  const Linear shard1 = Linear::Dense({DType::kF32, Shape({kOut, kIn / 2}), w_half[1].data()});
  std::vector<float> peer(kRows * kOut), y(kRows * kOut);
  shard1.Apply(x_half[1].data(), kRows, peer.data());
  PeerSumCommunicator comm(peer);
  RowParallelApply(shard0, x_half[0].data(), kRows, y.data(), comm);
  for (int64_t i = 0; i < kRows * kOut; ++i) EXPECT_NEAR(y[i], full[i], 1e-4f) << i;
}

}  // namespace
}  // namespace ember
