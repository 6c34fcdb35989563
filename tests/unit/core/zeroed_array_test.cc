// ZeroedArray: zero-valued, writable, movable, and lazily committed (a large one costs no
// resident memory until written; read from /proc/self/status).
#include "core/zeroed_array.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "core/host_memory.h"

namespace ember {
namespace {

TEST(ZeroedArray, StartsZeroAndHoldsWhatIsWritten) {
  ZeroedArray<float> a(100000);
  ASSERT_EQ(a.size(), 100000u);
  for (size_t i = 0; i < a.size(); i += 997) EXPECT_EQ(a[i], 0.0f);
  a[12345] = 3.5f;
  EXPECT_EQ(a.span()[12345], 3.5f);
  ZeroedArray<float> b = std::move(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b[12345], 3.5f);
  b = ZeroedArray<float>(8);
  EXPECT_EQ(b.size(), 8u);
  EXPECT_EQ(b[7], 0.0f);
  EXPECT_TRUE(ZeroedArray<uint8_t>().empty());
}

TEST(ZeroedArray, CommitsMemoryOnlyAsItIsWritten) {
  const int64_t before = ResidentMemoryBytes().total;
  ASSERT_GT(before, 0);
  constexpr size_t kBytes = size_t{1} << 30;  // 1 GiB: zero-filling it would make it resident
  ZeroedArray<uint8_t> pool(kBytes);
  EXPECT_LT(ResidentMemoryBytes().total - before, int64_t{64} << 20);
  // Writing one byte every 4 KiB of the first 64 MiB commits (about) those 64 MiB.
  for (size_t i = 0; i < (size_t{64} << 20); i += 4096) pool[i] = 1;
  const int64_t grown = ResidentMemoryBytes().total - before;
  EXPECT_GE(grown, int64_t{60} << 20);
  EXPECT_LT(grown, int64_t{256} << 20);
}

// A pool of a huge page or more starts on a huge-page boundary, so all of it can be backed by huge
// pages; a smaller one is page-aligned.
TEST(ZeroedArray, LargePoolsStartOnAHugePage) {
  for (const size_t bytes : {kHugePageBytes, kHugePageBytes + 1, size_t{5} << 20, size_t{64} << 20}) {
    ZeroedPages pages(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pages.data()) % kHugePageBytes, 0u) << bytes << " bytes";
    static_cast<uint8_t*>(pages.data())[bytes - 1] = 1;  // the whole size is mapped
  }
  ZeroedPages small(4096 * 3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 4096, 0u);
}

}  // namespace
}  // namespace ember
