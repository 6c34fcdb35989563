// LruCache: Find refreshes, Insert evicts the least recent until the cost fits, oversize and
// duplicate inserts keep nothing new.
#include "core/lru_cache.h"

#include <gtest/gtest.h>

#include <string>

namespace ember {
namespace {

TEST(LruCache, EvictsTheLeastRecentlyUsedByCost) {
  LruCache<int, std::string> cache(10);
  EXPECT_EQ(cache.Insert(1, "a", 4), 0);
  EXPECT_EQ(cache.Insert(2, "b", 4), 0);
  ASSERT_NE(cache.Find(1), nullptr);  // 1 is now the most recent
  EXPECT_EQ(cache.Insert(3, "c", 4), 1);  // 2 goes
  EXPECT_EQ(cache.Find(2), nullptr);
  EXPECT_EQ(*cache.Find(1), "a");
  EXPECT_EQ(cache.cost(), 8);
  EXPECT_EQ(cache.Insert(1, "again", 1), 0);  // present: unchanged
  EXPECT_EQ(*cache.Find(1), "a");
  EXPECT_EQ(cache.Insert(4, "big", 11), 0);  // over the whole budget: not kept
  EXPECT_EQ(cache.Find(4), nullptr);
  EXPECT_EQ(cache.Insert(5, "e", 10), 2);  // fills it: both go
  EXPECT_EQ(cache.size(), 1);
  EXPECT_EQ(cache.cost(), 10);
  LruCache<int, int> off(0);
  off.Insert(1, 1, 1);
  EXPECT_EQ(off.Find(1), nullptr);
}

}  // namespace
}  // namespace ember
