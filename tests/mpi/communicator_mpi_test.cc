// MpiCommunicator across real processes: run under mpiexec with 2 and 3 ranks (tests/CMakeLists.txt,
// mpi_communicator_np*). Every rank runs every test in the same order, as the collectives
// require; each test checks its own rank's results against values it computes for all ranks.
// Rank 0 prints gtest's usual output; the other ranks print only their failures, prefixed with
// their rank, and the job fails when any rank fails.
#include "parallel/mpi_communicator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "parallel/mpi_runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#define EMBER_MPI_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMBER_MPI_TEST_ASAN 1
#endif
#endif
#ifdef EMBER_MPI_TEST_ASAN
#include <sanitizer/lsan_interface.h>
#endif

namespace ember::parallel {
namespace {

// Rank `rank`'s i-th value: magnitudes from 1e-4 to 1e4 and both signs, so that the order of a
// sum changes its rounding (the rank-order check below would not notice otherwise).
float Value(int rank, int64_t i) {
  uint32_t h = static_cast<uint32_t>(rank) * 2654435761u ^ static_cast<uint32_t>(i) * 2246822519u;
  h ^= h >> 15;
  h *= 2654435761u;
  h ^= h >> 13;
  const float mantissa = 1.0f + static_cast<float>(h & 0xffff) / 65536.0f;
  const int exponent = static_cast<int>((h >> 16) % 27) - 13;
  return ((h >> 31) ? -1.0f : 1.0f) * std::ldexp(mantissa, exponent);
}

std::vector<float> Values(int rank, int64_t count, int64_t offset = 0) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = Value(rank, offset + i);
  return v;
}

// ((v_0 + v_1) + v_2) + ... for element `offset + i` of every rank's values.
std::vector<float> RankOrderSum(int ranks, int64_t count, int64_t offset = 0) {
  std::vector<float> sum = Values(0, count, offset);
  for (int r = 1; r < ranks; ++r) {
    const std::vector<float> v = Values(r, count, offset);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += v[i];
  }
  return sum;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class MpiCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    comm_ = MpiCommunicator::World();
    // A test whose ranks fell out of step ends in the default handler's MPI_Abort, well within
    // ctest's TIMEOUT, instead of hanging.
    comm_->set_timeout(60.0);
    rank_ = comm_->rank();
    size_ = comm_->world_size();
  }

  std::unique_ptr<MpiCommunicator> comm_;
  int rank_ = 0;
  int size_ = 1;
};

TEST_F(MpiCommunicatorTest, WorldIsEveryRank) {
  ASSERT_GE(size_, 2) << "run under mpiexec -np 2 or more";
  for (int r = 0; r < size_; ++r) EXPECT_EQ(comm_->WorldRankOf(r), r);
  EXPECT_TRUE(LaunchedByMpi());
}

TEST_F(MpiCommunicatorTest, MpiStartsOncePerProcess) {
  int argc = 0;
  char** argv = nullptr;
  auto again = MpiRuntime::Init(&argc, &argv);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().message(), "MPI is already initialised: one MpiRuntime per process, created once");
}

TEST_F(MpiCommunicatorTest, AllReduceSumIsTheRankOrderSumWithTheSameBitsEverywhere) {
  // 16,385 and 100,003 floats take the two-round path over 3 ranks, in uneven chunks.
  for (int64_t count : {int64_t{1}, int64_t{576}, int64_t{1000}, int64_t{2048}, int64_t{16385}, int64_t{100003}}) {
    SCOPED_TRACE(count);
    std::vector<float> data = Values(rank_, count);
    comm_->AllReduceSum(data.data(), count);
    const std::vector<float> expected = RankOrderSum(size_, count);
    EXPECT_TRUE(SameBits(data, expected));
    // Every rank's result bits, gathered: all equal to rank 0's.
    std::vector<float> all(static_cast<size_t>(size_ * count));
    comm_->AllGather(data.data(), count, all.data());
    for (int r = 0; r < size_; ++r) {
      EXPECT_EQ(std::memcmp(all.data() + r * count, all.data(), count * sizeof(float)), 0) << "rank " << r;
    }
    if (size_ >= 3 && count >= 576) {
      // The order matters for these values, so the check above is a check of the order.
      std::vector<float> reverse = Values(size_ - 1, count);
      for (int r = size_ - 2; r >= 0; --r) {
        const std::vector<float> v = Values(r, count);
        for (size_t i = 0; i < reverse.size(); ++i) reverse[i] += v[i];
      }
      EXPECT_FALSE(SameBits(reverse, expected));
    }
  }
  comm_->AllReduceSum(nullptr, 0);
}

TEST_F(MpiCommunicatorTest, ReduceScatterSumGivesEachRankItsBlockOfTheRankOrderSum) {
  const int64_t count = 333;
  const std::vector<float> in = Values(rank_, size_ * count);
  std::vector<float> out(count, -1.0f);
  comm_->ReduceScatterSum(in.data(), count, out.data());
  EXPECT_TRUE(SameBits(out, RankOrderSum(size_, count, rank_ * count)));
}

TEST_F(MpiCommunicatorTest, AllGatherInPlaceAndNot) {
  const int64_t count = 100;
  std::vector<float> expected;
  for (int r = 0; r < size_; ++r) {
    const std::vector<float> v = Values(r, count);
    expected.insert(expected.end(), v.begin(), v.end());
  }
  const std::vector<float> in = Values(rank_, count);
  std::vector<float> out(static_cast<size_t>(size_ * count), 0.0f);
  comm_->AllGather(in.data(), count, out.data());
  EXPECT_TRUE(SameBits(out, expected));
  std::vector<float> in_place(static_cast<size_t>(size_ * count), 0.0f);
  std::copy(in.begin(), in.end(), in_place.begin() + rank_ * count);
  comm_->AllGather(in_place.data() + rank_ * count, count, in_place.data());
  EXPECT_TRUE(SameBits(in_place, expected));
}

// Row j sent from rank s to rank d holds (s, d, j, column) in its floats.
float RowValue(int source, int dest, int64_t row, int64_t column) {
  return static_cast<float>(source * 1000000 + dest * 10000 + row * 10 + column);
}

TEST_F(MpiCommunicatorTest, AllToAllVWithUnevenAndZeroCounts) {
  const int64_t width = 5;
  // Rank s sends (s + 2 d) % 3 rows to rank d: some pairs (self included) exchange none.
  auto rows = [](int source, int dest) { return static_cast<int64_t>((source + 2 * dest) % 3); };
  std::vector<int64_t> send_rows(static_cast<size_t>(size_)), recv_rows(static_cast<size_t>(size_));
  std::vector<float> send, expected;
  for (int p = 0; p < size_; ++p) {
    send_rows[static_cast<size_t>(p)] = rows(rank_, p);
    recv_rows[static_cast<size_t>(p)] = rows(p, rank_);
    for (int64_t j = 0; j < rows(rank_, p); ++j) {
      for (int64_t c = 0; c < width; ++c) send.push_back(RowValue(rank_, p, j, c));
    }
    for (int64_t j = 0; j < rows(p, rank_); ++j) {
      for (int64_t c = 0; c < width; ++c) expected.push_back(RowValue(p, rank_, j, c));
    }
  }
  std::vector<float> recv(expected.size(), -1.0f);
  comm_->AllToAllV(send.data(), send_rows, recv.data(), recv_rows, width);
  EXPECT_EQ(recv, expected);

  // Nothing at all to exchange.
  const std::vector<int64_t> none(static_cast<size_t>(size_), 0);
  comm_->AllToAllV(nullptr, none, nullptr, none, width);
}

TEST_F(MpiCommunicatorTest, BroadcastFromEveryRoot) {
  for (int root = 0; root < size_; ++root) {
    std::vector<uint8_t> data(1237);
    for (size_t i = 0; i < data.size(); ++i) {
      data[i] = static_cast<uint8_t>(rank_ == root ? (i * 7 + static_cast<size_t>(root)) : 0xee);
    }
    comm_->Broadcast(data.data(), static_cast<int64_t>(data.size()), root);
    for (size_t i = 0; i < data.size(); ++i) {
      ASSERT_EQ(data[i], static_cast<uint8_t>(i * 7 + static_cast<size_t>(root))) << "byte " << i << " from " << root;
    }
  }
  comm_->Broadcast(nullptr, 0, size_ - 1);
}

TEST_F(MpiCommunicatorTest, AllReduceMinAgrees) {
  EXPECT_EQ(comm_->AllReduceMin(1000 - 7 * rank_), 1000 - 7 * (size_ - 1));
  const int64_t low = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(comm_->AllReduceMin(rank_ == 1 ? low : std::numeric_limits<int64_t>::max()), low);
}

// Rank 0 and 1 exchange messages with user tags; a collective between a Send and its Recv does
// not take the user's message (collectives have their own tag space).
TEST_F(MpiCommunicatorTest, SendRecvWithTags) {
  const int32_t five = 5, three = 3, zero = 0;
  if (rank_ == 0) {
    // Small messages: sent eagerly, so the receiver may take them in another order.
    comm_->Send(&five, sizeof five, 1, 5);
    comm_->Send(&three, sizeof three, 1, 3);
    comm_->Send(&zero, sizeof zero, 1, 0);
  } else if (rank_ == 1) {
    int32_t got = -1;
    comm_->Recv(&got, sizeof got, 0, 3);
    EXPECT_EQ(got, 3);
    comm_->Recv(&got, sizeof got, 0, 5);
    EXPECT_EQ(got, 5);
  }
  std::vector<float> data = Values(rank_, 16);
  comm_->AllReduceSum(data.data(), 16);
  EXPECT_TRUE(SameBits(data, RankOrderSum(size_, 16)));
  if (rank_ == 1) {
    int32_t got = -1;
    comm_->Recv(&got, sizeof got, 0, 0);
    EXPECT_EQ(got, 0);
  }
  // A few MB the other way, in 1 MiB chunks.
  comm_->set_max_chunk_bytes(1 << 20);
  const std::vector<float> big = Values(1, 1'000'003);
  if (rank_ == 1) {
    comm_->Send(big.data(), static_cast<int64_t>(big.size() * sizeof(float)), 0, exec::Communicator::kMaxUserTag - 1);
  } else if (rank_ == 0) {
    std::vector<float> got(big.size());
    comm_->Recv(got.data(), static_cast<int64_t>(got.size() * sizeof(float)), 1, exec::Communicator::kMaxUserTag - 1);
    EXPECT_TRUE(SameBits(got, big));
  }
}

TEST_F(MpiCommunicatorTest, LargeMessagesInChunksAndWhole) {
  const int64_t count = 1 << 20;  // 4 MiB per rank
  for (int64_t chunk : {int64_t{1} << 30, int64_t{1} << 20, int64_t{999'999}}) {
    SCOPED_TRACE(chunk);
    comm_->set_max_chunk_bytes(chunk);
    std::vector<float> data = Values(rank_, count);
    comm_->AllReduceSum(data.data(), count);
    EXPECT_TRUE(SameBits(data, RankOrderSum(size_, count)));
    std::vector<float> all(static_cast<size_t>(size_ * count));
    const std::vector<float> mine = Values(rank_, count);
    comm_->AllGather(mine.data(), count, all.data());
    for (int r = 0; r < size_; ++r) {
      EXPECT_EQ(std::memcmp(all.data() + r * count, Values(r, count).data(), count * sizeof(float)), 0);
    }
    std::vector<uint8_t> bytes(3'000'001, static_cast<uint8_t>(rank_ == 0 ? 0x5a : 0));
    comm_->Broadcast(bytes.data(), static_cast<int64_t>(bytes.size()), 0);
    EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0x5a), static_cast<ptrdiff_t>(bytes.size()));
  }
}

TEST_F(MpiCommunicatorTest, SplitMakesIndependentGroups) {
  // Even and odd world ranks, each group ordered from its highest world rank down.
  const int color = rank_ % 2;
  std::unique_ptr<MpiCommunicator> group = comm_->Split(color, -rank_);
  std::vector<int> members;
  for (int r = size_ - 1; r >= 0; --r) {
    if (r % 2 == color) members.push_back(r);
  }
  ASSERT_EQ(group->world_size(), static_cast<int>(members.size()));
  for (int g = 0; g < group->world_size(); ++g) EXPECT_EQ(group->WorldRankOf(g), members[static_cast<size_t>(g)]);
  EXPECT_EQ(group->WorldRankOf(group->rank()), rank_);
  EXPECT_EQ(group->timeout(), comm_->timeout());

  // Each group sums its own members' values, in group-rank order.
  std::vector<float> data = Values(rank_, 64);
  group->AllReduceSum(data.data(), 64);
  std::vector<float> expected = Values(members[0], 64);
  for (size_t g = 1; g < members.size(); ++g) {
    const std::vector<float> v = Values(members[g], 64);
    for (size_t i = 0; i < expected.size(); ++i) expected[i] += v[i];
  }
  EXPECT_TRUE(SameBits(data, expected));
  EXPECT_EQ(group->AllReduceMin(rank_), members.back());
  // The world is still usable, and its messages do not meet the groups'.
  EXPECT_EQ(comm_->AllReduceMin(rank_), 0);
}

// One rank arrives late: the others' fault handlers name exactly that rank (by world rank), then
// the collective completes once it catches up.
TEST_F(MpiCommunicatorTest, TimeoutNamesTheRankThatDidNotAnswer) {
  // A group ordered backwards, so that group ranks and world ranks differ: messages must name
  // world ranks.
  std::unique_ptr<MpiCommunicator> group = comm_->Split(0, -rank_);
  const int sleeper = 0;  // world rank
  std::vector<std::string> faults;
  // Generous margins: a waiting rank is not named unless it is 0.5 s late, which a loaded CI
  // machine running other tests beside these three ranks should never make it.
  group->set_timeout(0.5);
  group->set_fault_handler([&](const std::string& message) { faults.push_back(message); });
  if (rank_ == sleeper) std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  std::vector<float> data = Values(rank_, 576);
  group->AllReduceSum(data.data(), 576);
  std::vector<float> expected = Values(size_ - 1, 576);  // group rank 0 is the highest world rank
  for (int r = size_ - 2; r >= 0; --r) {
    const std::vector<float> v = Values(r, 576);
    for (size_t i = 0; i < expected.size(); ++i) expected[i] += v[i];
  }
  EXPECT_TRUE(SameBits(data, expected));
  if (rank_ == sleeper) {
    EXPECT_TRUE(faults.empty()) << faults.front();  // everyone else was waiting already
  } else {
    ASSERT_EQ(faults.size(), 1u);
    EXPECT_EQ(faults[0], "rank 0 did not answer AllReduceSum within 0.5 s: it died or hangs");
  }

  // The same for a point-to-point receive from a late sender.
  faults.clear();
  const int last = size_ - 1;
  if (rank_ == last) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  int32_t value = rank_;
  if (rank_ == last) {
    group->Send(&value, sizeof value, size_ - 1, 9);  // group rank size - 1 is world rank 0
  } else if (rank_ == 0) {
    group->Recv(&value, sizeof value, 0, 9);  // group rank 0 is world rank `last`
    EXPECT_EQ(value, last);
    ASSERT_EQ(faults.size(), 1u);
    EXPECT_EQ(faults[0], fmt::format("rank {} did not answer Recv within 0.5 s: it died or hangs", last));
  }
  // Everyone leaves together.
  EXPECT_EQ(group->AllReduceMin(rank_), 0);
}

// Rank 0 keeps gtest's printer; the others report only their failures, with their rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
    }
  }

 private:
  int rank_;
};

}  // namespace
}  // namespace ember::parallel

int main(int argc, char** argv) {
  using ember::parallel::MpiRuntime;
  ::testing::InitGoogleTest(&argc, argv);
  auto runtime = MpiRuntime::Init(&argc, &argv);
  if (!runtime.ok()) {
    std::fprintf(stderr, "MpiRuntime::Init: %s\n", runtime.status().ToString().c_str());
    return 1;
  }
  const int rank = (*runtime)->world_rank();
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new ember::parallel::RankFailurePrinter(rank));
  }
  const int result = RUN_ALL_TESTS();
  {
    // How many ranks failed, so that rank 0's summary says so.
    auto world = ember::parallel::MpiCommunicator::World();
    const int64_t all_passed = world->AllReduceMin(result == 0 ? 1 : 0);
    if (rank == 0 && all_passed == 0) std::fprintf(stderr, "some ranks failed: see their [rank N] lines\n");
  }
#ifdef EMBER_MPI_TEST_ASAN
  // The leak check, now rather than at exit: MPI_Finalize unloads Open MPI's components, after
  // which LeakSanitizer can no longer name the modules in the stacks of what they allocated, and
  // tests/mpi/lsan_openmpi.supp could not match them. Every ember object is gone by now; what
  // MPI_Finalize itself leaves behind is the library's.
  __lsan_do_leak_check();
#endif
  runtime->reset();  // MPI_Finalize
  return result;
}
