// AllocateOnHugePages: aligned, disjoint buffers that keep what is written to them, carved from
// shared chunks that are given back to the system once their last buffer is released.
#include "core/huge_pages.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/host_memory.h"

namespace ember {
namespace {

TEST(HugePages, BuffersAreAlignedDisjointAndKeepTheirBytes) {
  // Small ones carved from a chunk, ones that spill into the next chunk, and ones larger than
  // half a chunk that get a mapping of their own.
  const std::vector<size_t> sizes = {0,       1,       63,       64,      1000,     300000,   5 << 20,
                                     40 << 20, 7,       17 << 20, 3 << 20, 48 << 20, 100,      9 << 20,
                                     1 << 20, 33 << 20, 65,       2 << 20, 12 << 20, 200 << 10};
  std::vector<std::shared_ptr<uint8_t>> buffers;
  for (size_t i = 0; i < sizes.size(); ++i) {
    buffers.push_back(AllocateOnHugePages(sizes[i]));
    ASSERT_NE(buffers.back(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffers.back().get()) % 64, 0u) << "buffer " << i;
    std::memset(buffers.back().get(), static_cast<int>(i + 1), std::max<size_t>(sizes[i], 1));
  }
  // Written one after another, each still holds its own byte: no two overlap.
  for (size_t i = 0; i < sizes.size(); ++i) {
    const uint8_t* p = buffers[i].get();
    const size_t n = std::max<size_t>(sizes[i], 1);
    EXPECT_EQ(p[0], i + 1) << "buffer " << i;
    EXPECT_EQ(p[n / 2], i + 1) << "buffer " << i;
    EXPECT_EQ(p[n - 1], i + 1) << "buffer " << i;
  }
  // Released in an order other than the one they were taken in.
  for (size_t i = 0; i < buffers.size(); i += 2) buffers[i].reset();
  for (size_t i = 1; i < buffers.size(); i += 2) EXPECT_EQ(buffers[i].get()[0], i + 1);
}

TEST(HugePages, MemoryIsGivenBackWhenItsBuffersAre) {
  // Twelve rounds of 64 MiB in 1 MiB buffers, written and released: resident memory must not
  // grow by the 768 MiB that keeping every chunk would cost (the bound leaves room for a
  // sanitizer's quarantine of freed heap memory).
  constexpr size_t kBuffer = size_t{1} << 20;
  constexpr int kRounds = 12, kPerRound = 64;
  const int64_t before = ResidentMemoryBytes().total;
  ASSERT_GT(before, 0);
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::shared_ptr<uint8_t>> buffers;
    for (int i = 0; i < kPerRound; ++i) {
      buffers.push_back(AllocateOnHugePages(kBuffer));
      std::memset(buffers.back().get(), round + 1, kBuffer);
    }
  }
  const int64_t grown = ResidentMemoryBytes().total - before;
  EXPECT_LT(grown, int64_t{384} << 20) << "resident memory grew by " << (grown >> 20) << " MiB";
}

TEST(HugePages, ModeIsTheBracketedWordOfTheKernelsFile) {
  EXPECT_EQ(ParseTransparentHugePageMode("always [madvise] never\n"), "madvise");
  EXPECT_EQ(ParseTransparentHugePageMode("[always] madvise never"), "always");
  EXPECT_EQ(ParseTransparentHugePageMode("always madvise [never]\n"), "never");
  EXPECT_EQ(ParseTransparentHugePageMode(""), "");
  EXPECT_EQ(ParseTransparentHugePageMode("always madvise never"), "");
  EXPECT_EQ(ParseTransparentHugePageMode("[sometimes] never"), "");
  EXPECT_EQ(TransparentHugePageMode("/nonexistent/transparent_hugepage/enabled"), "");
}

}  // namespace
}  // namespace ember
